"""The only settings module. Every value comes from an environment variable of the table in
benchhub/environment.py (its default and meaning are there); with DJANGO_DEBUG=1 and nothing else it
runs the embedded mode (SQLite, Celery tasks in-process)."""

from __future__ import annotations

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from benchhub import environment as env

BASE_DIR = env.BASE_DIR


# Fail closed: DEBUG only when asked for, and no public key outside it (`make run` and the test
# suite set DJANGO_DEBUG=1). The .env.example placeholder is refused, as is the embedded default's key.
DEBUG = env.boolean("DJANGO_DEBUG")
EMBEDDED_SECRET_KEY = "insecure-dev-key-only-for-the-embedded-default"
SECRET_KEY = env.text("DJANGO_SECRET_KEY")
if not SECRET_KEY and not DEBUG:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is not set. Set it to a random value (python -c 'import secrets; "
        "print(secrets.token_urlsafe(50))'), or set DJANGO_DEBUG=1 to run the development default."
    )
if SECRET_KEY.startswith("change-me") or SECRET_KEY == EMBEDDED_SECRET_KEY:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY is a published placeholder; set it to a random value of your own.")
SECRET_KEY = SECRET_KEY or EMBEDDED_SECRET_KEY
ALLOWED_HOSTS = env.listed("DJANGO_ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env.listed("DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "benchhub.accounts",
    "benchhub.results",
    "benchhub.api",
    "benchhub.web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

# Admin login: django-axes locks a client address out for an hour after
# AXES_FAILURE_LIMIT wrong passwords (`manage.py axes_reset` lifts it early).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.integer("BENCHHUB_ADMIN_LOGIN_FAILURES")
AXES_COOLOFF_TIME = 1  # hours
# Keyed by the client address alone: a lock on the username would lock the admin out from
# everywhere on an attacker's five guesses (issue 30).
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
AXES_RESET_ON_SUCCESS = True
# The address the throttles count, so a forged X-Forwarded-For buys no attempts either.
AXES_CLIENT_IP_CALLABLE = "benchhub.api.throttling.client_address"

# Every script is a file of ours (plotly.js, charts.js, Swagger UI from drf-spectacular-sidecar);
# figures travel as JSON data islands, which are not scripts. Styles may be inline: plotly.js and
# Swagger UI write style elements and attributes as they draw.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

ROOT_URLCONF = "benchhub.urls"
WSGI_APPLICATION = "benchhub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env.text("DATABASE_URL"),
        conn_max_age=env.integer("DATABASE_CONN_MAX_AGE"),
        conn_health_checks=True,
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("DJANGO_STATIC_ROOT")
STATICFILES_DIRS = [BASE_DIR / "static"]

# Where the patch files the campaigns measure live (served with their sha256).
PATCHES_DIR = env.path("BENCHHUB_PATCHES_DIR")
# Where the agent wheel the site serves at /agent/ is built (benchhub/web/wheel.py).
BENCHHUB_AGENT_WHEEL_DIR = env.path("BENCHHUB_AGENT_WHEEL_DIR")

REDIS_URL = env.text("REDIS_URL")

# Ingest limits and throttles (docs/protocol.md section 4). Rates are DRF strings: "<n>/<second|minute|hour|day>".
BENCHHUB_MAX_BODY_BYTES = env.integer("BENCHHUB_MAX_BODY_BYTES")
DATA_UPLOAD_MAX_MEMORY_SIZE = BENCHHUB_MAX_BODY_BYTES
BENCHHUB_THROTTLE_ADDRESS = env.text("BENCHHUB_THROTTLE_ADDRESS")
BENCHHUB_THROTTLE_KEY = env.text("BENCHHUB_THROTTLE_KEY")
# Registrations per network (IPv4 /24, IPv6 /64 and /48) and for everyone together (issue 30).
BENCHHUB_THROTTLE_NETWORK = env.text("BENCHHUB_THROTTLE_NETWORK")
BENCHHUB_THROTTLE_REGISTRATIONS = env.text("BENCHHUB_THROTTLE_REGISTRATIONS")
# Per client address: list pages and the leaderboard of the API, and the CSV export.
BENCHHUB_THROTTLE_READ = env.text("BENCHHUB_THROTTLE_READ")
BENCHHUB_THROTTLE_EXPORT = env.text("BENCHHUB_THROTTLE_EXPORT")
# How many reverse proxies in front of the service append to X-Forwarded-For; 0 trusts only REMOTE_ADDR.
BENCHHUB_TRUSTED_PROXY_COUNT = env.integer("BENCHHUB_TRUSTED_PROXY_COUNT")
# A submission whose cells are still unrefreshed this long after it arrived is re-queued by the sweeper.
# A new key's results enter the cells only once the key is this old (0: at once, the development
# default, so `make run` and its demo count every result).
BENCHHUB_KEY_PROBATION_S = env.integer("BENCHHUB_KEY_PROBATION_S", debug=DEBUG)
# How far in the future a payload's created_at may lie (clocks disagree a little).
BENCHHUB_CLOCK_SKEW_S = env.integer("BENCHHUB_CLOCK_SKEW_S")
BENCHHUB_SWEEPER_GRACE_SECONDS = env.integer("BENCHHUB_SWEEPER_GRACE_SECONDS")
BENCHHUB_SWEEPER_INTERVAL_SECONDS = env.number("BENCHHUB_SWEEPER_INTERVAL_SECONDS")
# The public snapshot (manage.py write_snapshot, benchhub/api/snapshot.py): where its files and index are
# written, how often (a million submissions take minutes: docs/performance.md, section 7), and the site's
# own URL that makes its patch links absolute. With nginx in front (docker-compose.yml), the view hands
# the file to nginx by X-Accel-Redirect to this internal location instead of sending it from a worker.
BENCHHUB_SNAPSHOT_DIR = env.path("BENCHHUB_SNAPSHOT_DIR")
BENCHHUB_SNAPSHOT_INTERVAL_SECONDS = env.number("BENCHHUB_SNAPSHOT_INTERVAL_SECONDS")
BENCHHUB_SNAPSHOT_ACCEL_REDIRECT = env.text("BENCHHUB_SNAPSHOT_ACCEL_REDIRECT")
BENCHHUB_PUBLIC_URL = env.text("BENCHHUB_PUBLIC_URL")
# Boards (leaderboard API, home and chip pages) whose cells changed are served as last rendered for at most
# this long, so continuous ingest costs one render per board per bound, not one per read. 0: never stale,
# the default with DEBUG on (development and the test suite, where a change should show at once). 2 s: at 100k
# the whole campaign's board renders in ~0.6 s and one batch size's in ~0.09 s (docs/performance.md section 2).
BENCHHUB_BOARD_MAX_STALENESS_SECONDS = env.number("BENCHHUB_BOARD_MAX_STALENESS_SECONDS", debug=DEBUG)

# Throttle counters must be shared by every gunicorn worker: Redis when there is one.
CACHES = {
    "default": (
        {
            "BACKEND": "benchhub.redis_cache.RedisCache",  # Django's, without a new client for every call
            "LOCATION": REDIS_URL,
            # A hung Redis must not hang requests: throttles fall back to per-process counters on error.
            "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0},
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "benchhub.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "benchhub API",
    "DESCRIPTION": "Signed, crowd-sourced A/B benchmarks of llama.cpp patches. The wire protocol is docs/protocol.md.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The docs page's assets are our static files (drf-spectacular-sidecar), not a CDN's, and its
    # validator badge (an image from validator.swagger.io) is off.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}

# Celery: with REDIS_URL a real broker and worker; without it tasks run in-process.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
# Env-driven only so that tests/reliability can show a worker-kill test failing with it off.
CELERY_TASK_ACKS_LATE = env.boolean("CELERY_TASK_ACKS_LATE")
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env.text("CELERY_QUEUE")
# A message taken by a worker that died is delivered again after this long (the sweeper also
# re-queues its submission); keep it well above the longest task.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.integer("CELERY_VISIBILITY_TIMEOUT_SECONDS"),
}
CELERY_BEAT_SCHEDULE = {
    "requeue-stale-submissions": {
        "task": "benchhub.results.tasks.requeue_stale_submissions",
        "schedule": BENCHHUB_SWEEPER_INTERVAL_SECONDS,
    },
    "write-snapshot": {"task": "benchhub.api.tasks.write_snapshot", "schedule": BENCHHUB_SNAPSHOT_INTERVAL_SECONDS},
}

# Security when deployed (DEBUG off): `manage.py check --deploy` must report nothing.
if not DEBUG:
    SECURE_SSL_REDIRECT = env.boolean("DJANGO_SECURE_SSL_REDIRECT")
    # Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and drops any the client sent):
    # only then may the header say a request came over HTTPS; without a proxy a client could forge it.
    if env.boolean("DJANGO_SECURE_PROXY_SSL_HEADER"):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.integer("DJANGO_HSTS_SECONDS")
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.text("DJANGO_LOG_LEVEL")},
    # The embedded default's in-memory broker has no host, which kombu warns about on every connection.
    "loggers": {} if REDIS_URL else {"kombu.connection": {"level": "ERROR"}},
}
