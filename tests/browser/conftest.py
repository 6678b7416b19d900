"""Browser tests: headless Chromium (Debian's) against the real ASGI server.

pytest-django's live_server speaks WSGI only, so daphne runs as a subprocess on a free
port, pointed at this run's test database (DRIFTLESS_DB_NAME) and at this run's Redis
prefixes (DRIFTLESS_TEST_RUN): events published from the test process reach the sockets
the browser holds, and rows the tests create are what the server reads. The tests use
``transactional_db``, so their rows are committed where daphne can see them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.live_server import plain_daphne, running_server

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing: apt-get install -y chromium"
        if CI:
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1280, "height": 800}}


def start_daphne(env_overrides: dict[str, str]):
    """daphne serving driftless.asgi on the test database; yields its URL, then stops it."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("browser tests share the test database with a server: PostgreSQL only")
    with running_server(env_overrides, server=plain_daphne) as url:
        yield url


@pytest.fixture(scope="session")
def server_url(django_db_setup, django_db_blocker) -> str:
    """daphne on the test database, for the whole session (static files from static/)."""
    yield from start_daphne({"DEBUG": "true"})


@pytest.fixture
def _allow_async_unsafe(monkeypatch):
    """Playwright's sync API runs an event loop in this thread; the ORM must still work
    here. Requested before transactional_db, so it also covers its teardown."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def _yield_deadlocks_to_the_server() -> None:
    """The server (a subprocess) may still be at work when the test's database is flushed
    (an exit evaluation, a list refresh): its transaction and the flush's TRUNCATE can
    deadlock. PostgreSQL aborts the process that waits ``deadlock_timeout`` first; a long
    one here makes that the server's late work, never the test's teardown. Set before the
    test and again after it, right before the flush: the test may have reopened the
    connection, and a setting lives as long as its connection."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET deadlock_timeout = '60s'")
    except Exception:  # not a superuser: keep the default
        pass


@pytest.fixture
def live(_allow_async_unsafe, transactional_db, server_url) -> Iterator[str]:
    _yield_deadlocks_to_the_server()
    yield server_url
    _yield_deadlocks_to_the_server()  # torn down before transactional_db's flush


@pytest.fixture
def login(live, context):
    """Log a user in by cookie (the login form has its own test)."""
    from django.test import Client

    def log_in(user) -> None:
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live}])

    return log_in


@pytest.fixture
def open_chat(live, login, page):
    """Open a session's chat page as its owner and wait for the socket."""

    def open_(session, *, user=None):
        login(user or session.user)
        page.set_default_timeout(10_000)
        page.goto(f"{live}/sessions/{session.pk}/")
        page.wait_for_selector("#conn[data-state=open]")
        return page

    return open_


@pytest.fixture(scope="session")
def slow_model():
    """A model whose replies stream for a minute (tests/browser/helpers.py)."""
    from tests.browser.helpers import SlowModel

    model = SlowModel()
    yield model
    model.close()


def slow_server_env(slow_model) -> dict[str, str]:
    return {
        "DEBUG": "true",
        "DRIFTLESS_TEST_OPENAI_BASE_URL": slow_model.base_url,
        "LLM_MAX_RETRIES": "0",
        "STREAM_BATCH_SECONDS": "0.05",
    }


@pytest.fixture(scope="session")
def slow_server_url(django_db_setup, django_db_blocker, slow_model) -> str:
    """daphne on the test database whose model is ``slow_model``."""
    yield from start_daphne(slow_server_env(slow_model))


@pytest.fixture
def open_slow_chat(_allow_async_unsafe, transactional_db, slow_server_url, context, page):
    """Open a session's chat page, served by the server whose model is slow."""
    from django.test import Client

    _yield_deadlocks_to_the_server()

    def open_(session):
        client = Client()
        client.force_login(session.user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": slow_server_url}]
        )
        page.set_default_timeout(10_000)
        page.goto(f"{slow_server_url}/sessions/{session.pk}/")
        page.wait_for_selector("#conn[data-state=open]")
        return page

    yield open_
    _yield_deadlocks_to_the_server()  # torn down before transactional_db's flush
