"""Where a chat-load run keeps its state: a PostgreSQL database and Redis keys of its own
when both answer on 127.0.0.1, else a throwaway SQLite file; and how to remove it."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import reachable

ROOT = Path(__file__).resolve().parents[2]
REDIS_DB_URL = "redis://127.0.0.1:6379/15"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SETTINGS_MODULE = "bench.chat_load.settings"


@dataclass
class Environment:
    """Where this run keeps its state, and how to remove it."""

    workdir: str
    pg_name: str | None = None
    redis_prefix: str = ""
    env: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        if self.pg_name:
            return "PostgreSQL database, Redis cache and channel layer"
        return "SQLite database, in-process cache and channel layer"


def configure(*, embedded: bool) -> Environment:
    """Choose the storage and set the environment of the servers' settings module
    (bench/chat_load/settings.py, used here too)."""
    workdir = tempfile.mkdtemp(prefix="bench-chat-load-")
    env = Environment(workdir=workdir)
    services = not embedded and reachable(5432) and reachable(6379)
    values = {
        "SECRET_KEY": "bench-only-secret-key",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DRIFTLESS_VAR_DIR": workdir,
        "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
        "LOG_LEVEL": "WARNING",
        "LLM_MAX_RETRIES": "0",
        "LLM_TIMEOUT_SECONDS": "60",
        "PYTHONPATH": str(ROOT),
        "BENCH_REDIS_PREFIX": "",
    }
    if services:
        import psycopg

        env.pg_name = f"bench_chat_load_{os.getpid()}"
        env.redis_prefix = f"benchchat{os.getpid()}"
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{env.pg_name}"')
        values["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{env.pg_name}"
        values["REDIS_URL"] = REDIS_DB_URL
        values["BENCH_REDIS_PREFIX"] = env.redis_prefix
    for name in ("DATABASE_URL", "REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    os.environ.update(values)
    env.env = values
    return env


def tear_down(env: Environment) -> None:
    """Drop the database, the Redis keys of this run and the temporary directory."""
    from django.db import connections

    connections.close_all()
    if env.redis_prefix:
        import redis

        client = redis.Redis.from_url(REDIS_DB_URL)
        for key in client.scan_iter(match=f"{env.redis_prefix}*", count=500):
            client.delete(key)
        client.close()
    if env.pg_name:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{env.pg_name}" WITH (FORCE)')
    shutil.rmtree(env.workdir, ignore_errors=True)
