"""Driftless settings: one file, driven by environment variables.

With nothing set, the app runs embedded: SQLite under ``var/``, in-process cache and
channel layer, tasks run in-process, and the offline model. ``DATABASE_URL`` and
``REDIS_URL`` switch to PostgreSQL and Redis (cache, channel layer, Celery broker).
"""

from pathlib import Path

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from driftless.env import (
    check_redis_url,
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_str,
    mcp_servers_from_env,
    secret_key_from_env_or_file,
)
from memory.lib.limits import SERVER_MAX_FRAME_BYTES

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("DRIFTLESS_VAR_DIR") or BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
# SECRET_KEY, or the installation's own random key in var/secret_key, generated on first
# use (driftless/env.py): every process of one installation (server, worker, management
# commands) reads the same key, in development and in production alike; nothing needs
# DEBUG. Several machines serving one site set SECRET_KEY to one value.
SECRET_KEY = secret_key_from_env_or_file("SECRET_KEY", VAR_DIR / "secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# Security headers (SecurityMiddleware; nosniff, same-origin referrer and opener policies
# are Django's defaults). HTTPS-only settings are opt-in: the TLS proxy's operator knows.
X_FRAME_OPTIONS = "DENY"
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
if env_bool("SECURE_PROXY_SSL_HEADER", False):  # behind a proxy that sets X-Forwarded-Proto
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Content-Security-Policy (django-csp): scripts, styles and connections from this origin
# only; no inline script, no style attributes, no framing. 'self' covers the same-origin
# websocket (ws:/wss:) in current browsers.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Login throttling (chat/login_throttle.py) and API throttling (DRF, below).
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_LOCKOUT_SECONDS = env_int("LOGIN_LOCKOUT_SECONDS", 900, minimum=1)
# The proxies in front (their addresses as the server sees them): X-Forwarded-For is read
# only from these, its rightmost other entry being the client. Empty: the header is ignored.
FORWARDED_ALLOW_IPS = env_list("FORWARDED_ALLOW_IPS", [])
# Searches and new sessions per user a minute on the pages (chat/middleware.py).
PAGE_RATE_PER_MINUTE = env_int("PAGE_RATE_PER_MINUTE", 30, minimum=1)
# Open sockets of one user per server process, and frames a socket may send a minute
# (chat/socket_limits.py).
SOCKETS_PER_USER = env_int("SOCKETS_PER_USER", 20, minimum=1)
SOCKET_FRAMES_PER_MINUTE = env_int("SOCKET_FRAMES_PER_MINUTE", 120, minimum=1)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "csp",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "channels",
    "memory",
    "chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "chat.middleware.Utf8PathMiddleware",
    "chat.middleware.NoStoreApiMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "chat.middleware.CostlyPageRateMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "chat.errors.ErrorIdMiddleware",
]

# What daphne buffers for one websocket message (runserver reads these; the daphne command
# takes --websocket_max_message_size / --websocket_max_frame_size): above the protocol's
# frame limit, so an oversized frame is answered frame_too_large (memory/lib/limits.py).
DAPHNE_WEBSOCKET_MAX_MESSAGE_SIZE = SERVER_MAX_FRAME_BYTES
DAPHNE_WEBSOCKET_MAX_FRAME_SIZE = SERVER_MAX_FRAME_BYTES

ROOT_URLCONF = "driftless.urls"
WSGI_APPLICATION = "driftless.wsgi.application"
ASGI_APPLICATION = "driftless.asgi.application"

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

# Database: SQLite under var/ unless DATABASE_URL names a PostgreSQL server.
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": database_from_url("DATABASE_URL", DATABASE_URL)}
    # A pool of connections per server process (psycopg_pool): the websocket's turn threads
    # and the evaluation threads borrow one and give it back when their work ends, instead
    # of connecting anew each time (about 5 % of a turn's CPU) or each keeping one open.
    # Several processes (`make serve`) hold at most WORKERS × this many between them.
    DATABASE_POOL_SIZE = env_int("DATABASE_POOL_SIZE", 40)
    if DATABASE_POOL_SIZE:
        DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps them open; Django needs 0
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 2,
            "max_size": DATABASE_POOL_SIZE,
            "timeout": 30,
        }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "driftless.sqlite3",
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis: cache, channel layer and Celery broker; in-process stand-ins without it.
CHANNEL_SOCKET_TIMEOUT = 30.0
# channels-redis queues the events of every socket of one server process in ONE Redis key
# and drops, silently, what arrives while that key holds `capacity` events (default 100):
# ten replies streaming at once were enough to lose deltas and turn.done. Room for a burst
# of a few hundred sockets; about 200 bytes an event, so a full key is a few megabytes.
CHANNEL_CAPACITY = 10_000
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    check_redis_url("REDIS_URL", REDIS_URL)
    # Redis is a speed-up, never the only copy (memory/infra/outage.py): a failed cache call is
    # a miss, and every read through the cache falls back to the database.
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "driftless",
            "OPTIONS": {
                "IGNORE_EXCEPTIONS": True,
                "SOCKET_CONNECT_TIMEOUT": 2,
                "SOCKET_TIMEOUT": 2,
            },
        }
    }
    DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS = True
    CHANNEL_LAYERS = {
        "default": {
            # channels-redis's layer, reading many events per round trip (its module says why)
            "BACKEND": "driftless.channel_layer.RedisChannelLayer",
            # channels-redis waits for messages with a 5 s BZPOPMIN, and redis-py's
            # default socket timeout is 5 s too: every idle websocket would die with a
            # read timeout. The socket must outwait the blocking pop.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": CHANNEL_SOCKET_TIMEOUT}],
                "prefix": "driftless",
                "capacity": CHANNEL_CAPACITY,
            },
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = False
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    # Embedded mode has no worker: tasks run in the process that enqueues them.
    CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = False
# A task is acknowledged when it has run, and put back when its worker dies; the worker
# reconnects to the broker (`make worker` restarts it if it gives up). The tasks are
# idempotent, so a redelivery is harmless.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# An unacknowledged task of a worker that vanished is delivered again after this long.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 15 * 60}
# The sweep (memory/actions/scheduling.py): Celery beat runs it with a worker; a thread of
# the server process does in the embedded mode. A request is "overdue" after the grace period.
EVALUATION_SWEEP_SECONDS = env_float("EVALUATION_SWEEP_SECONDS", 15.0, minimum=1.0)
EVALUATION_SWEEP_GRACE_SECONDS = env_float("EVALUATION_SWEEP_GRACE_SECONDS", 30.0, minimum=0.0)
CELERY_BEAT_SCHEDULE = {
    "sweep": {"task": "memory.sweep", "schedule": EVALUATION_SWEEP_SECONDS},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True

# The model: any OpenAI-compatible endpoint; the offline model when neither is set.
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
DRIFTLESS_MODEL = env_str("DRIFTLESS_MODEL", "gpt-4o-mini")
DRIFTLESS_SUMMARY_MODEL = env_str("DRIFTLESS_SUMMARY_MODEL")
# The local model `make run` prepares and starts in the background (driftless/local_model.py)
# when no endpoint is configured: "off" never does (tests and CI set it).
LOCAL_MODEL = env_str("LOCAL_MODEL", "auto").lower()
# What the model is good at (memory/llm/profiles.py): "auto" takes its family's defaults;
# "small" sends question turns without tool schemas (tools only when the message asks for
# a memory action); "capable" offers every tool on every turn.
DRIFTLESS_MODEL_PROFILE = env_str("DRIFTLESS_MODEL_PROFILE", "auto").lower()
if DRIFTLESS_MODEL_PROFILE not in ("auto", "small", "capable"):
    raise ImproperlyConfigured("DRIFTLESS_MODEL_PROFILE must be auto, small or capable")
# Model call timeouts, seconds. LLM_TIMEOUT_SECONDS: until the first streamed token (a CPU
# model reads a long prompt at ~70 tokens/s: minutes). LLM_IDLE_TIMEOUT_SECONDS: between
# two chunks once the answer started (a stall). No total: a long answer may take its time.
LLM_CONNECT_TIMEOUT_SECONDS = env_float("LLM_CONNECT_TIMEOUT_SECONDS", 10.0, minimum=0.1)
LLM_TIMEOUT_SECONDS = env_float("LLM_TIMEOUT_SECONDS", 300.0, minimum=1.0)
LLM_IDLE_TIMEOUT_SECONDS = env_float("LLM_IDLE_TIMEOUT_SECONDS", 30.0, minimum=0.1)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 2)
# The longest reply a chat call may write (tokens; 0: the provider's own limit). A small
# model sometimes runs on: on a CPU every token of it is a user's wait.
LLM_REPLY_MAX_TOKENS = env_int("LLM_REPLY_MAX_TOKENS", 1024, minimum=0)
# The model's context window (tokens): no request fills more than three quarters of it
# (the rest is the answer's, and the token estimate's error). 8192 is what a CPU model
# serves on a small machine; raise it for a hosted model.
DRIFTLESS_MODEL_CONTEXT = env_int("DRIFTLESS_MODEL_CONTEXT", 8192, minimum=2048)
# Reply deltas are coalesced on the server: the first goes out at once, the rest at most
# one event per this many seconds (the page reveals each batch smoothly). 0 sends one
# event per streamed token (each one a channel-layer round trip and a socket frame).
STREAM_BATCH_SECONDS = env_float("STREAM_BATCH_SECONDS", 0.1)
# A message that arrives while the session's previous turn is finishing waits this long
# for it before it is refused as busy (nothing is stored then, and the page keeps it).
TURN_BUSY_WAIT_SECONDS = env_float("TURN_BUSY_WAIT_SECONDS", 3.0)
# A socket's login is checked when it opens and on every account-change notice (logout,
# password change, deactivation close it at once); a frame re-reads the login itself only
# when this long has passed since the last check (a login removed without a notice).
SOCKET_LOGIN_RECHECK_SECONDS = env_float("SOCKET_LOGIN_RECHECK_SECONDS", 60.0)
# Fair sharing: turns one user, and one organization, may run at once (over every server
# process); one more is refused with ``busy`` (memory/stores/leases.py).
TURN_CAP_PER_USER = env_int("TURN_CAP_PER_USER", 3, minimum=1)
TURN_CAP_PER_ORGANIZATION = env_int("TURN_CAP_PER_ORGANIZATION", 200, minimum=1)

# Memory behaviour (the spec's constants live in memory/lib/spec.py; these are knobs).
DRIFT_SCAN_BACK = env_int("DRIFT_SCAN_BACK", 10, minimum=1)
# The largest memory document POST /agents-api/memory/import accepts.
MEMORY_IMPORT_MAX_BYTES = env_int("MEMORY_IMPORT_MAX_BYTES", 20 * 1024 * 1024, minimum=1024)
DRIFT_DETECTOR = env_str("DRIFT_DETECTOR", "auto")
# The summary call's input cap (approximate tokens, prompt included); DRIFTLESS_MODEL_CONTEXT
# bounds it too. Past it, the oldest messages of the call are left out.
SUMMARY_INPUT_TOKEN_BUDGET = env_int("SUMMARY_INPUT_TOKEN_BUDGET", 16000, minimum=2000)
# A refresh sends the previous summary plus the messages since (it costs what is new);
# false sends the whole history whenever it fits the budget.
SUMMARY_INCREMENTAL = env_bool("SUMMARY_INCREMENTAL", True)
# A summary's include_in_memory: true is looked at again by the sentence encoder before
# the topic is promoted (memory/actions/promotion.py): auto (a small model's flag only),
# on, or off.
PROMOTION_SECOND_LOOK = env_str("PROMOTION_SECOND_LOOK", "auto").lower()
if PROMOTION_SECOND_LOOK not in ("auto", "on", "off"):
    raise ImproperlyConfigured("PROMOTION_SECOND_LOOK must be auto, on or off")
# At each evaluation, facts the user stated in the topic are captured by one constrained
# call and stored as set by the agent, the user's own words as evidence
# (memory/actions/capture.py): what a lean turn, with no tools, could not store.
EVALUATION_FACT_CAPTURE = env_bool("EVALUATION_FACT_CAPTURE", False)
# Each turn, what recall finds in the scope's other topics for the user's latest message is
# quoted after the window (memory/actions/context.py), so a model that never calls the
# recall tool still sees it (a 1.5B model never did: docs/memory.md).
RECALL_IN_CONTEXT = env_bool("RECALL_IN_CONTEXT", True)
# Those passages are ranked by words (BM25) and by meaning (sentence vectors,
# memory/stores/recall/vectors.py), fused; false ranks them by words alone.
RECALL_BY_MEANING = env_bool("RECALL_BY_MEANING", True)
# Consolidation runs by itself after an evaluation once this many topics of the scope were
# promoted since its last run, or once one was and the memory block drops entries for its
# budget (memory/actions/consolidation/run.py); 0 turns the automatic runs off.
CONSOLIDATION_AFTER_PROMOTIONS = env_int("CONSOLIDATION_AFTER_PROMOTIONS", 10, minimum=0)
# The "earlier topics in this session" block's cap (approximate tokens, oldest dropped first).
EARLIER_TOPICS_TOKEN_BUDGET = env_int("EARLIER_TOPICS_TOKEN_BUDGET", 1500, minimum=100)
# How many of the newest earlier topics that block shows with their summaries; the older
# ones appear by title only (the notes tool's read gives the agent any one's summary).
EARLIER_TOPICS_WITH_SUMMARY = env_int("EARLIER_TOPICS_WITH_SUMMARY", 3, minimum=0)

# MCP servers are the operator's to declare (commands run as the server's user, URLs are
# fetched from the server): agents only choose among these names (Agent.mcp_servers).
MCP_SERVERS = mcp_servers_from_env("DRIFTLESS_MCP_SERVERS", "DRIFTLESS_MCP_SERVERS_FILE")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    # Token first: DRF answers 401 with the first class's WWW-Authenticate challenge
    # (``Token``); a session class first would turn every auth failure into a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON only, parsed with a depth limit; every error one shape, with the domain's code.
    "DEFAULT_PARSER_CLASSES": ["chat.api.input.DepthLimitedJSONParser"],
    "EXCEPTION_HANDLER": "chat.api.errors.exception_handler",
    # Per caller, in the shared cache: a turn costs a model call, so the default is modest.
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("API_THROTTLE_ANON", "60/minute"),
        "user": env_str("API_THROTTLE_USER", "600/minute"),
        # A memory export reads a whole history: the REST export and the page's download.
        "export": env_str("EXPORT_THROTTLE", "10/minute"),
    },
    # The anonymous rate counts by address: X-Forwarded-For (its last entry, the one the
    # proxy appended) only behind a configured proxy, else the peer (DRF would otherwise
    # take the whole header, which the client writes).
    "NUM_PROXIES": 1 if FORWARDED_ALLOW_IPS else 0,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Driftless agents API",
    "DESCRIPTION": "Sessions, topics, messages and curated memory of Driftless agents.",
    "VERSION": "1.0.0",
    # The memory state appears in topics and in the curation request: one enum for both.
    "ENUM_NAME_OVERRIDES": {"MemoryStateEnum": "memory.models.MemoryState"},
    # The schema maps every endpoint and limit: for logged-in callers only.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Static files: WhiteNoise serves them from the ASGI app itself, compressed, after
# `manage.py collectstatic` (into STATIC_ROOT); under DEBUG straight from static/.
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT") or VAR_DIR / "staticfiles")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's default configuration gives the "django" logger its own console handler
        # and lets it propagate to the root one too: every server line came out twice.
        # Here the root handler alone prints (one line per event).
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        # The model client logs every HTTP request at INFO; that is noise in a chat server.
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
    },
}
