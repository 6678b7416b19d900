"""Settings for the test suite: the real services when they are reachable.

PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) are used when they answer;
otherwise the suite runs on the embedded default and tests marked ``postgres`` or
``redis`` are skipped with a reason. Under ``CI=true`` a missing service is an error.
"""

import os
import socket


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
# DRIFTLESS_TEST_EMBEDDED=1 runs on the embedded default even where the services answer
# (a test re-runs the SQLite-specific parts this way).
EMBEDDED = bool(os.environ.get("DRIFTLESS_TEST_EMBEDDED"))
SERVICES = {
    "postgres": not EMBEDDED and _reachable("127.0.0.1", 5432),
    "redis": not EMBEDDED and _reachable("127.0.0.1", 6379),
}
if CI and not all(SERVICES.values()):
    missing = ", ".join(name for name, up in SERVICES.items() if not up)
    raise RuntimeError(f"CI=true but these services are not reachable: {missing}")

os.environ.setdefault("SECRET_KEY", "tests-only-secret-key")
# Tests never prepare nor start the local model (a server a test starts inherits this).
# A server a browser test starts may follow a status file the test writes in its own var
# directory (DRIFTLESS_TEST_LOCAL_MODEL=auto): still nothing is built or started.
os.environ["LOCAL_MODEL"] = os.environ.get("DRIFTLESS_TEST_LOCAL_MODEL") or "off"
# The deterministic stand-in encoder (memory/text/embeddings.py): a test about the packaged
# encoder chooses it itself.
os.environ.setdefault("DRIFTLESS_EMBEDDINGS", "hashed")
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("OPENAI_BASE_URL", None)
# A server or worker a test starts as a process talks to that test's fake model server.
if os.environ.get("DRIFTLESS_TEST_OPENAI_BASE_URL"):
    os.environ["OPENAI_BASE_URL"] = os.environ["DRIFTLESS_TEST_OPENAI_BASE_URL"]
    os.environ["OPENAI_API_KEY"] = "test-key"
if SERVICES["postgres"]:
    os.environ["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/driftless"
else:
    os.environ.pop("DATABASE_URL", None)
if SERVICES["redis"]:
    os.environ["REDIS_URL"] = "redis://127.0.0.1:6379/11"
else:
    os.environ.pop("REDIS_URL", None)

from driftless.settings import *  # noqa: E402, F403
from driftless.settings import (  # noqa: E402
    CACHES,
    CHANNEL_CAPACITY,
    CHANNEL_LAYERS,
    CHANNEL_SOCKET_TIMEOUT,
    DATABASES,
    VAR_DIR,
)

# Several test runs may share one Redis (parallel developers, a dev worker): each run
# gets its own key prefix, channel prefix and Celery queue, and its own Redis databases.
# DRIFTLESS_TEST_RUN lets a server started by the browser tests (a daphne subprocess) share
# the prefixes of the pytest process that started it, so events it publishes reach it.
_RUN = os.environ.get("DRIFTLESS_TEST_RUN") or f"test{os.getpid()}"
if SERVICES["postgres"]:
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("DRIFTLESS_TEST_DB", "test_driftless")}
    # No pool: its idle connections would keep the test database from being dropped.
    DATABASES["default"].get("OPTIONS", {}).pop("pool", None)
    # DRIFTLESS_DB_NAME points that subprocess at the already created test database itself.
    if os.environ.get("DRIFTLESS_DB_NAME"):
        DATABASES["default"]["NAME"] = os.environ["DRIFTLESS_DB_NAME"]
else:
    # A file, not SQLite's shared-cache memory database: there a second writer (a
    # background evaluation) fails at once with "table is locked" instead of waiting.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
if SERVICES["redis"]:
    CACHES["default"]["KEY_PREFIX"] = _RUN
    CHANNEL_LAYERS["default"]["CONFIG"] = {
        "hosts": [
            {"address": "redis://127.0.0.1:6379/12", "socket_timeout": CHANNEL_SOCKET_TIMEOUT}
        ],
        "prefix": _RUN,
        "capacity": CHANNEL_CAPACITY,
    }
    CELERY_BROKER_URL = "redis://127.0.0.1:6379/13"
# A fault test's own redis-server (tests/faults.py), for the servers and workers it starts.
_PRIVATE_REDIS = os.environ.get("DRIFTLESS_TEST_REDIS_URL")
if _PRIVATE_REDIS:
    CACHES = {
        "default": {
            **CACHES["default"],
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": f"{_PRIVATE_REDIS}/0",
        }
    }
    CACHES["default"].setdefault("OPTIONS", {"IGNORE_EXCEPTIONS": True})
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "driftless.channel_layer.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {"address": f"{_PRIVATE_REDIS}/1", "socket_timeout": CHANNEL_SOCKET_TIMEOUT}
                ],
                "prefix": _RUN,
                "capacity": CHANNEL_CAPACITY,
            },
        }
    }
    CELERY_BROKER_URL = f"{_PRIVATE_REDIS}/2"
CELERY_TASK_DEFAULT_QUEUE = _RUN
# Tests run tasks in-process unless a test starts a real worker (see tests/test_celery_*);
# a worker a test starts as a process says so with DRIFTLESS_TEST_EAGER=false.
CELERY_TASK_ALWAYS_EAGER = os.environ.get("DRIFTLESS_TEST_EAGER", "true") == "true"
# A busy session is refused after a short wait here, so busy tests stay quick.
TURN_BUSY_WAIT_SECONDS = 0.3
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The websocket origin check is built when driftless.asgi is imported, before pytest-django
# adds "testserver", so the hosts the tests use are listed here.
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
# Async tests reach the database from worker threads; closing each connection when its
# call ends keeps the test database free to be dropped at the end of the run.
DATABASES["default"]["CONN_MAX_AGE"] = 0
