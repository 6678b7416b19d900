"""Production mode in a real browser: DEBUG off, static files collected and served by
WhiteNoise, every page under the Content-Security-Policy, and a turn still streams."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

import pytest
from django.conf import settings

from tests.browser.conftest import ROOT, start_daphne
from tests.browser.test_chat import collect_events, wait_for_reply

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

# Recorded in the page before any of its own scripts run (an init script is not subject
# to the page's CSP): every violation the browser reports.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(event.violatedDirective + " " + (event.blockedURI || "inline"));
});
"""


@pytest.fixture(scope="module")
def production_url(django_db_setup, django_db_blocker, tmp_path_factory) -> str:
    static_root = tmp_path_factory.mktemp("staticfiles")
    env = {"STATIC_ROOT": str(static_root), "DJANGO_SETTINGS_MODULE": "tests.settings"}
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (static_root / "js" / "chat.js").exists()
    yield from start_daphne({**env, "DEBUG": "false", "SECURE_COOKIES": "false"})


@pytest.fixture
def production(_allow_async_unsafe, transactional_db, production_url) -> str:
    return production_url


def test_static_files_are_served_compressed_without_debug(production):
    request = urllib.request.Request(
        f"{production}/static/js/chat.js", headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Encoding"] == "gzip"
    with urllib.request.urlopen(f"{production}/login/", timeout=5) as response:
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_the_chat_page_runs_under_the_csp_and_a_turn_streams(production, page, context, session):
    from django.test import Client

    client = Client()
    client.force_login(session.user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": production}]
    )
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.add_init_script(RECORD_VIOLATIONS)
    events = collect_events(page)
    page.set_default_timeout(10_000)

    response = page.goto(f"{production}/sessions/{session.pk}/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector("#conn[data-state=open]")  # the scripts ran, the socket opened
    # The stylesheet applied: the icon sprite is hidden by app.css, not by a style attribute.
    assert (
        page.evaluate("getComputedStyle(document.querySelector('.icon-sprite')).display") == "none"
    )

    page.get_by_label("Message Drift").fill("Hello in production mode")
    page.get_by_role("button", name="Send message").click()
    wait_for_reply(page)

    # The first piece at once, the rest coalesced (the offline model streams instantly).
    assert len([e for e in events if e["type"] == "reply.delta"]) >= 2, "the reply streamed"
    assert page.evaluate("window.__cspViolations") == []
    assert not [text for text in console if "Content Security Policy" in text], console
    assert failed == []
