"""The chat-load servers' settings (and the bench's own): the project's, with evaluations
run in-process (no worker) and the Redis keys of the run under the prefix it names in
``BENCH_REDIS_PREFIX`` (none on the embedded storage)."""

import os

from driftless.settings import *  # noqa: F403
from driftless.settings import CACHES, CHANNEL_LAYERS

CELERY_TASK_ALWAYS_EAGER = True
_prefix = os.environ.get("BENCH_REDIS_PREFIX", "")
if _prefix:
    CACHES["default"]["KEY_PREFIX"] = _prefix
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = _prefix
    if os.environ.get("BENCH_CHANNELS_REDIS_LAYER"):  # the old path
        CHANNEL_LAYERS["default"]["BACKEND"] = "channels_redis.core.RedisChannelLayer"

if os.environ.get("BENCH_COUNTS_DIR"):  # SQL statements and Redis commands, for the bench
    from bench.counting import install_process_counters

    install_process_counters(os.environ["BENCH_COUNTS_DIR"])
