"""The model badge in Chromium (issue 44): it follows make run's local model from its
progress to the ready model with no reload, and the user picks a session's model among
those the operator allows, the next message answered by it.

The server follows a status file the test writes in the server's own var directory
(tests/settings.py: DRIFTLESS_TEST_LOCAL_MODEL); nothing is built or started."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import expect

from memory.models import ModelEndpoint
from tests.browser.conftest import _yield_deadlocks_to_the_server
from tests.browser.test_chat import wait_for_reply
from tests.fake_openai import FakeOpenAI
from tests.live_server import plain_daphne, running_server

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

SMALL = "qwen2.5-coder-1.5b-instruct"


def open_page(page, context, base: str, session):
    client = Client()
    client.force_login(session.user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base}])
    page.set_default_timeout(10_000)
    page.goto(f"{base}/sessions/{session.pk}/")
    page.wait_for_selector("#conn[data-state=open]")
    page.evaluate("() => { document.body.dataset.loadedOnce = 'yes'; }")  # gone on a reload


@pytest.fixture
def lane_server(_allow_async_unsafe, transactional_db, tmp_path):
    """A server with no model configured that follows the local model's status file."""
    env = {
        "DEBUG": "true",
        "DRIFTLESS_VAR_DIR": str(tmp_path),
        "DRIFTLESS_TEST_LOCAL_MODEL": "auto",
    }
    _yield_deadlocks_to_the_server()
    with running_server(env, server=plain_daphne) as base:
        yield base, tmp_path
    _yield_deadlocks_to_the_server()


def say(var, **status) -> None:
    (var / "local-model.json").write_text(json.dumps(status))


def test_the_badge_follows_the_local_models_preparation_without_a_reload(
    lane_server, page, context, session, tmp_path
):
    base, var = lane_server
    say(var, state="preparing", step=3, message="Preparing the local model: building, 3 of 4 steps")
    open_page(page, context, base, session)
    badge = page.locator("#model-badge")
    expect(badge).to_contain_text("Preparing the local model: building, 3 of 4 steps")

    say(var, state="preparing", step=4, message="Starting the local model")
    expect(badge).to_contain_text("Starting the local model")

    model = FakeOpenAI(default_text="Paris.")
    try:
        (var / "key").write_text("lane-key\n")
        say(
            var,
            state="ready",
            base_url=model.base_url,
            key_file=str(var / "key"),
            model=SMALL,
            message="ready",
        )
        expect(badge).to_have_text(f"Model: {SMALL} · small")
        assert page.evaluate("() => document.body.dataset.loadedOnce") == "yes"  # no reload
        expect(page.locator("#model-area")).to_have_attribute("data-lane", "")

        page.get_by_label("Message Drift").fill("The capital of France?")
        page.keyboard.press("Enter")
        wait_for_reply(page, 1)
        expect(page.locator(".msg-assistant").last).to_contain_text("Paris.")
        assert model.requests[-1]["model"] == SMALL
        assert model.headers[-1]["authorization"] == "Bearer lane-key"
    finally:
        model.close()


def test_the_user_picks_the_sessions_model_and_a_withdrawn_one_is_refused(
    lane_server, page, context, session
):
    base, var = lane_server
    picked = FakeOpenAI(default_text="Answered by the picked model.")
    try:
        endpoint = ModelEndpoint.objects.create(
            name="GPU box",
            base_url=picked.base_url,
            model_names=f"big-model\n{SMALL}\nother-small-1b",
            user_model_names=f"{SMALL}\nother-small-1b",
        )
        open_page(page, context, base, session)
        expect(page.locator("#model-badge")).to_contain_text("Offline model")
        picker = page.get_by_label("Model of this session")
        picker.select_option(f"{endpoint.pk}:{SMALL}")
        expect(page.locator("#model-badge")).to_have_text(f"Model: {SMALL} · small")

        page.get_by_label("Message Drift").fill("Who answers?")
        page.keyboard.press("Enter")
        wait_for_reply(page, 1)
        expect(page.locator(".msg-assistant").last).to_contain_text("Answered by the picked")
        assert picked.requests[-1]["model"] == SMALL

        # The operator withdraws the other model while the page shows it: refused, said.
        endpoint.user_model_names = SMALL
        endpoint.save()
        page.get_by_label("Model of this session").select_option(f"{endpoint.pk}:other-small-1b")
        expect(page.locator("#toast")).to_contain_text("The model was not changed")
        expect(page.locator("#toast")).to_contain_text("not a model you may pick")
        expect(page.get_by_label("Model of this session")).to_have_value(f"{endpoint.pk}:{SMALL}")
        expect(page.locator("#model-badge")).to_have_text(f"Model: {SMALL} · small")
        expect(page.locator(".msg")).to_have_count(2)  # nothing lost
    finally:
        picked.close()
