"""gunicorn's settings for the web service (docker-compose.yml runs it with `-c`, and its own --bind).

gthread workers: a worker's heartbeat goes on while one of its threads streams a response, so an
export that takes longer than `timeout` (a CSV of a million rows, a slow client) completes instead
of being killed mid-body (issue 46). `timeout` still restarts a worker whose main loop hangs."""

workers = 3
worker_class = "gthread"
threads = 4
timeout = 30
accesslog = "-"
