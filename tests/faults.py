"""Faults a test owns: a private redis-server it starts and kills, and server or worker
processes in their own process group that it can SIGKILL or SIGTERM.

Never the shared Redis on 6379: other test runs and services use it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """``redis-server --port N --save "" --appendonly no``: started, killed and started
    again on the same port, so clients see an outage and a recovery."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
            + ["--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: _answers(self.port), 10, f"redis-server on port {self.port}")
        return self

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Spawned:
    """A subprocess in its own process group, its output in a log file."""

    def __init__(self, argv: list[str], env: dict[str, str], name: str) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix=f"{name}-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            os.killpg(self.process.pid, signum)

    def kill(self) -> None:
        """SIGKILL the whole group (a worker's pool children too) and reap it."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def app_env(*, redis: RedisServer, openai_base_url: str, **extra: str) -> dict[str, str]:
    """The environment of a server or worker process started by a test: this run's test
    database and queue, the test's private Redis and fake model server, real tasks."""
    from django.conf import settings
    from django.db import connection

    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DRIFTLESS_DB_NAME": connection.settings_dict["NAME"],
        "DRIFTLESS_TEST_RUN": settings.CELERY_TASK_DEFAULT_QUEUE,
        "DRIFTLESS_TEST_REDIS_URL": redis.url,
        "DRIFTLESS_TEST_EAGER": "false",
        "DRIFTLESS_TEST_OPENAI_BASE_URL": openai_base_url,
        "DRIFTLESS_MODEL": "gpt-4o-mini",
        "DRIFTLESS_SUMMARY_MODEL": "",
        "LLM_TIMEOUT_SECONDS": "20",
        "LLM_MAX_RETRIES": "0",
        "DRIFT_DETECTOR": "lexical",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


@contextmanager
def celery_broker(url: str) -> Iterator[None]:
    """Point this process's Celery app (and its producer pools) at ``url`` for a while;
    pytest-django's settings fixture cannot reach an already built app."""
    from driftless.celery import app

    before, before_eager = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = url, False
    app._after_fork()  # forget the pools of the previous broker
    try:
        yield
    finally:
        app.conf.broker_url, app.conf.task_always_eager = before, before_eager
        app._after_fork()
