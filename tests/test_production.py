"""Production serving: headers and CSP, throttled logins and API, 401 for token failures,
and failures shown to users with an error id and without internal addresses."""

from __future__ import annotations

import logging
import re

import pytest
from django.test import override_settings
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from memory.actions.turn import do_send_message
from memory.lib.errors import without_addresses
from memory.llm import clear_client_cache
from memory.models import Message

pytestmark = pytest.mark.django_db

ERROR_ID = re.compile(r"\(error id ([0-9a-f]{12})\)")


def test_pages_carry_a_csp_without_inline_script_and_the_security_headers(client, alice, session):
    client.force_login(alice)
    for path in ("/login/", "/", f"/sessions/{session.pk}/", "/agents-api/sessions/"):
        response = client.get(path)
        csp = response.headers["Content-Security-Policy"]
        directives = dict(part.strip().split(" ", 1) for part in csp.split(";") if part.strip())
        assert directives["script-src"] == "'self'", path
        assert directives["style-src"] == "'self'", path
        assert directives["frame-ancestors"] == "'none'", path
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Referrer-Policy"] == "same-origin"


def test_the_pages_hold_no_inline_script_handler_or_style(client, alice, session):
    client.force_login(alice)
    for path in ("/login/", "/", f"/sessions/{session.pk}/"):
        page = client.get(path).content.decode()
        for script in re.findall(r"<script\b[^>]*>", page):
            assert "src=" in script or 'type="application/json"' in script, (path, script)
        assert not re.search(r"\son[a-z]+\s*=", page), path
        assert not re.search(r"\sstyle\s*=", page), path


# --- login throttling --------------------------------------------------------------------


@override_settings(LOGIN_FAILURE_LIMIT=5)
def test_after_five_wrong_passwords_even_the_right_one_is_refused(client, alice):
    for _ in range(5):
        response = client.post("/login/", {"username": "alice", "password": "wrong"})
        assert response.status_code == 200 and "_auth_user_id" not in client.session
    response = client.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 200
    assert "Too many failed attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session


@override_settings(LOGIN_FAILURE_LIMIT=5)
def test_a_success_before_the_limit_clears_the_count(client, alice):
    for _ in range(4):
        client.post("/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/login/", {"username": "alice", "password": "pw-alice"}).status_code == 302
    client.logout()
    for _ in range(4):
        client.post("/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/login/", {"username": "alice", "password": "pw-alice"}).status_code == 302


@override_settings(LOGIN_FAILURE_LIMIT=3)
def test_the_admin_login_is_throttled_too(client, db):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("operator", "op@example.com", "pw-operator")
    for _ in range(3):
        client.post("/admin/login/", {"username": "operator", "password": "wrong"})
    response = client.post("/admin/login/", {"username": "operator", "password": "pw-operator"})
    assert response.status_code == 200 and "Too many failed attempts" in response.content.decode()


# --- the API --------------------------------------------------------------------------


def test_a_bad_token_is_a_401_with_a_www_authenticate_challenge(session):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = client.get("/agents-api/sessions/")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Token"
    anonymous = APIClient().get(f"/agents-api/sessions/{session.pk}/")
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == "Token"


def test_the_api_is_throttled_per_user(alice, monkeypatch):
    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", {"user": "3/minute", "anon": "2/minute"}
    )
    client = APIClient()
    client.force_login(alice)
    codes = [client.get("/agents-api/sessions/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    assert int(client.get("/agents-api/sessions/").headers["Retry-After"]) > 0
    anonymous = [APIClient().get("/agents-api/agents/").status_code for _ in range(3)]
    assert anonymous == [401, 401, 401]  # refused before throttling, never a 5xx


# --- errors -----------------------------------------------------------------------------


def test_a_model_failure_shows_an_error_id_not_the_endpoint(session, fake_openai, settings, caplog):
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1/"  # nothing listens there
    clear_client_cache()
    with caplog.at_level(logging.ERROR, logger="driftless.errors"):
        result = do_send_message(session=session, content="hello?")
    shown = result.error.content
    assert "127.0.0.1" not in shown and ":9" not in shown
    assert "model endpoint" in shown
    (error_id,) = ERROR_ID.findall(shown)
    logged = [r.getMessage() for r in caplog.records if error_id in r.getMessage()]
    assert logged and "http://127.0.0.1:9/v1/" in logged[0]
    stored = session.messages.get(role=Message.Role.ERROR)
    assert stored.content == shown


def test_a_server_error_answers_with_an_error_id_and_logs_the_detail(alice, session, caplog):
    from memory.stores import messages as thread

    client = APIClient()
    client.force_login(alice)
    with pytest.MonkeyPatch.context() as patch:
        # A fault inside the view (not the model): the database call blows up.
        patch.setattr(thread, "usage_totals", _explode)
        patch.setattr("chat.api.sessions.usage_totals", _explode)
        with caplog.at_level(logging.ERROR, logger="driftless.errors"):
            response = client.get(f"/agents-api/sessions/{session.pk}/")
    assert response.status_code == 500
    body = response.json()
    assert set(body) == {"detail", "error_id"} and "10.1.2.3" not in response.content.decode()
    assert any(body["error_id"] in r.getMessage() and r.exc_info for r in caplog.records)


def _explode(**kwargs):
    raise RuntimeError("cannot reach postgres at 10.1.2.3:5432")


def test_addresses_are_taken_out_of_user_facing_text():
    text = "connection to model endpoint at https://llm.internal:8443/v1/ failed (10.0.0.7:80)"
    assert without_addresses(text) == (
        "connection to model endpoint at [address] failed ([address])"
    )


# --- the throttle cannot be sidestepped (issue 20) -------------------------------------


@override_settings(LOGIN_FAILURE_LIMIT=5)
@pytest.mark.parametrize("spelling", ["ａｌｉｃｅ", "𝐚𝐥𝐢𝐜𝐞", "ALICE", "Alice"])
def test_the_throttle_holds_for_every_spelling_of_the_username(client, alice, spelling):
    for _ in range(5):
        client.post("/login/", {"username": "alice", "password": "wrong"})
    response = client.post("/login/", {"username": spelling, "password": "pw-alice"})
    assert "Too many failed attempts" in response.content.decode()
    response = client.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert "Too many failed attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session


@override_settings(LOGIN_FAILURE_LIMIT=5)
def test_full_width_spellings_share_one_count(client, alice):
    for spelling in ["alice", "ａｌｉｃｅ", "𝐚𝐥𝐢𝐜𝐞", "ＡＬＩＣＥ", "alice"]:
        client.post("/login/", {"username": spelling, "password": "wrong"})
    response = client.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert "Too many failed attempts" in response.content.decode()


@override_settings(LOGIN_FAILURE_LIMIT=5, FORWARDED_ALLOW_IPS=[])
def test_a_rotating_x_forwarded_for_is_ignored_without_a_configured_proxy(client, alice):
    for n in range(5):
        client.post(
            "/login/",
            {"username": "alice", "password": "wrong"},
            HTTP_X_FORWARDED_FOR=f"198.51.100.{n}",
        )
    response = client.post(
        "/login/", {"username": "alice", "password": "pw-alice"}, HTTP_X_FORWARDED_FOR="192.0.2.9"
    )
    assert "Too many failed attempts" in response.content.decode()


@override_settings(LOGIN_FAILURE_LIMIT=5, FORWARDED_ALLOW_IPS=["127.0.0.1"])
def test_behind_the_proxy_the_client_is_the_hop_the_proxy_appended(client, alice):
    """The client prepends whatever it likes; the proxy (127.0.0.1) appends the real peer."""
    for n in range(5):
        client.post(
            "/login/",
            {"username": "alice", "password": "wrong"},
            HTTP_X_FORWARDED_FOR=f"198.51.100.{n}, 203.0.113.7",
            REMOTE_ADDR="127.0.0.1",
        )
    response = client.post(
        "/login/",
        {"username": "alice", "password": "pw-alice"},
        HTTP_X_FORWARDED_FOR="192.0.2.9, 203.0.113.7",
        REMOTE_ADDR="127.0.0.1",
    )
    assert "Too many failed attempts" in response.content.decode()
    # Another client behind the same proxy is not locked out.
    other = client.post(
        "/login/",
        {"username": "alice", "password": "pw-alice"},
        HTTP_X_FORWARDED_FOR="203.0.113.8",
        REMOTE_ADDR="127.0.0.1",
    )
    assert other.status_code == 302


@override_settings(LOGIN_FAILURE_LIMIT=2)
def test_an_account_backs_off_whatever_the_address(client, alice):
    for n in range(8):  # four times the limit, each from a new address
        client.post(
            "/login/", {"username": "alice", "password": "wrong"}, REMOTE_ADDR=f"198.51.100.{n}"
        )
    response = client.post(
        "/login/", {"username": "alice", "password": "pw-alice"}, REMOTE_ADDR="192.0.2.1"
    )
    assert "Too many failed attempts" in response.content.decode()


def test_the_server_refuses_daphnes_proxy_headers_which_trust_the_leftmost_hop():
    from driftless.serve import without_proxy_headers

    argv = ["-b", "127.0.0.1", "-p", "8000", "driftless.asgi:application"]
    assert without_proxy_headers(argv) == argv
    with pytest.raises(SystemExit, match="FORWARDED_ALLOW_IPS"):
        without_proxy_headers(["--proxy-headers", *argv])


@override_settings(LOGIN_FAILURE_LIMIT=5)
def test_padding_the_name_with_spaces_shares_its_count(client, alice):
    """Issue 45, item 6: the form strips the name; the throttle counts the stripped name."""
    for spelling in ["alice ", " alice", "alice  ", "\talice", "alice\u3000"]:
        client.post("/login/", {"username": spelling, "password": "wrong"})
    for spelling in ["alice", "alice ", " ALICE "]:
        response = client.post("/login/", {"username": spelling, "password": "pw-alice"})
        assert response.status_code == 200
        assert "Too many failed attempts" in response.content.decode()
        assert "_auth_user_id" not in client.session
