"""A real ASGI server for the tests that need one: ``python -m driftless.serve`` (daphne
with the project's websocket limits and graceful stop, as ``make run`` serves; or
``make serve``'s processes), on a free port, against this run's test database and
channel-layer prefix. The tests that use it need
``transactional_db`` so the rows they create are committed where the server reads them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
START_SECONDS = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_run_server(port: int) -> list[str]:  # what make run serves
    return ["-m", "driftless.serve", "-b", "127.0.0.1", "-p", str(port), APP]


def plain_daphne(port: int) -> list[str]:  # plain daphne: no sweep thread, no graceful stop
    return ["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), APP]


def make_serve_server(port: int) -> list[str]:  # what make serve runs, with two processes
    return ["-m", "driftless.multiserve", "--port", str(port), "--workers", "2"]


APP = "driftless.asgi:application"


@contextmanager
def running_server(
    extra_env: dict[str, str] | None = None,
    *,
    server: Callable[[int], list[str]] = make_run_server,
    port: int | None = None,
) -> Iterator[str]:
    """The base URL of a server started for the caller (with ``extra_env`` added to its
    environment; without DEBUG it serves as in production), stopped when the block ends.
    ``port``: a given one (a server started again where its clients knew it)."""
    port = port or free_port()
    base = {name: value for name, value in os.environ.items() if name != "DEBUG"}
    env = {
        **base,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DRIFTLESS_DB_NAME": connection.settings_dict["NAME"],
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    run = settings.CHANNEL_LAYERS["default"].get("CONFIG", {}).get("prefix")
    if run:  # the server's events reach this run's channel layer
        env["DRIFTLESS_TEST_RUN"] = run
    log = tempfile.NamedTemporaryFile(prefix="serve-", suffix=".log", delete=False)
    process = subprocess.Popen(
        [sys.executable, *server(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/login/", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the server did not start; its log:\n{Path(log.name).read_text()[-4000:]}"
                )
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
