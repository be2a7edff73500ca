"""gunicorn's settings for the web service (docker-compose.yml and the Dockerfile run it with `-c`).

gthread workers: a worker's heartbeat goes on while one of its threads streams a response, so an
export that takes longer than `timeout` (a CSV of a million rows, a slow client) completes instead
of being killed mid-body (issue 46). `timeout` still restarts a worker whose main loop hangs."""

bind = "0.0.0.0:8000"
workers = 3
worker_class = "gthread"
threads = 4
timeout = 30
accesslog = "-"
