"""A session's model (issue 44): the badge the page asks again while make run prepares the
local model, and the model a user picks for a session among those the operator allows.

The next turn answers with the pick, with no restart, and the model profile follows it; a
model the operator did not allow is refused with a clear error and nothing is lost; a
stranger can neither read nor change another user's session; drift, summaries and the
fact capture ask the session's model, not the deployment's."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from memory.actions.evaluation import run_evaluation
from memory.models import ModelEndpoint, Session
from tests.evaluation_helpers import SUBJECT_A, converse
from tests.fake_openai import FakeOpenAI

SMALL = "qwen2.5-coder-1.5b-instruct"
PREPARING = "Preparing the local model: building, 3 of 4 steps"


@pytest.fixture
def other_server():
    server = FakeOpenAI(default_text="Hello from the picked model.")
    yield server
    server.close()


@pytest.fixture
def allowed(other_server, monkeypatch) -> ModelEndpoint:
    """An endpoint of two models, of which the operator lets users pick the small one."""
    monkeypatch.setenv("PICKED_ENDPOINT_KEY", "picked-secret")
    other_server.required_key = "picked-secret"
    return ModelEndpoint.objects.create(
        name="GPU box",
        base_url=other_server.base_url,
        model_names=f"big-model\n{SMALL}",
        user_model_names=SMALL,
        api_key_env="PICKED_ENDPOINT_KEY",
    )


def api_for(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def model_url(session: Session) -> str:
    return f"/agents-api/sessions/{session.pk}/model"


def turn(user, session: Session, content: str) -> dict:
    response = api_for(user).post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": content}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def tool_names(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


# --- the badge, asked again while the local model is prepared ---------------------------


def test_the_badge_says_the_local_models_progress_then_names_it_once_ready(
    alice, session, settings, tmp_path, fake_openai
):
    settings.VAR_DIR = tmp_path
    settings.LOCAL_MODEL = "auto"
    settings.OPENAI_BASE_URL = settings.OPENAI_API_KEY = ""
    status = tmp_path / "local-model.json"
    status.write_text(json.dumps({"state": "preparing", "step": 3, "message": PREPARING}))

    body = api_for(alice).get(model_url(session)).json()
    assert body["offline"] is True and body["state"] == "preparing"
    assert body["local"] == PREPARING
    assert 'data-lane="preparing"' in body["badge"] and PREPARING in body["badge"]

    (tmp_path / "key").write_text("lane-key\n")
    status.write_text(
        json.dumps(
            {
                "state": "ready",
                "base_url": fake_openai.base_url,
                "key_file": str(tmp_path / "key"),
                "model": SMALL,
                "message": "ready",
            }
        )
    )
    body = api_for(alice).get(model_url(session)).json()
    assert body["offline"] is False and body["state"] == "" and body["name"] == SMALL
    assert body["profile"] == "small"
    assert f"Model: {SMALL}" in body["badge"] and 'data-lane=""' in body["badge"]


def test_a_stranger_gets_nothing_of_another_users_session_model(session, bob, charlie):
    for stranger in (bob, charlie):
        assert api_for(stranger).get(model_url(session)).status_code == 404
    assert APIClient().get(model_url(session)).status_code in (401, 403)


# --- a model per session, among those the operator allows -------------------------------


def test_the_user_picks_a_model_and_the_next_turn_answers_with_it(
    alice, session, fake_openai, other_server, allowed
):
    assert turn(alice, session, "First?")["reply"]["content"] == fake_openai.default_text
    assert tool_names(fake_openai.requests[-1])  # gpt-4o-mini: capable, every tool

    shown = api_for(alice).get(model_url(session)).json()
    ids = [choice["id"] for choice in shown["choices"]]
    assert ids == ["", f"{allowed.pk}:{SMALL}"]  # the agent's, then the one allowed
    assert shown["choice"] == ""
    assert shown["choices"][0]["label"] == "gpt-4o-mini (the agent's)"

    response = api_for(alice).put(model_url(session), {"choice": ids[1]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["name"] == SMALL and response.json()["choice"] == ids[1]
    assert 'id="model-choice"' in response.json()["badge"]

    body = turn(alice, session, "When does my passport expire?")
    assert body["reply"]["content"] == "Hello from the picked model."
    picked = other_server.requests[-1]
    assert picked["model"] == SMALL
    assert other_server.headers[-1]["authorization"] == "Bearer picked-secret"
    # The profile follows the pick: a small model's question goes out lean.
    assert tool_names(picked) == []
    context = api_for(alice).get(f"/agents-api/sessions/{session.pk}/context").json()
    assert context["profile"]["model"] == SMALL and context["profile"]["kind"] == "small"
    assert len(fake_openai.requests) == 1  # no restart, nothing else asked the deployment

    # Back to the agent's model, on the next turn again.
    api_for(alice).put(model_url(session), {"choice": ""}, format="json")
    turn(alice, session, "And now?")
    assert len(fake_openai.requests) == 2 and fake_openai.requests[-1]["model"] == "gpt-4o-mini"


@pytest.mark.parametrize(
    "choice",
    [
        "{pk}:big-model",
        "{pk}:not-served",
        "999999:" + SMALL,
        "99999999999999999999999:" + SMALL,
        "nonsense",
        ":" + SMALL,
        "{pk}:",
    ],
)
def test_a_model_the_operator_did_not_allow_is_refused_and_nothing_is_lost(
    alice, session, fake_openai, allowed, choice
):
    turn(alice, session, "Keep me.")
    before = list(session.messages.order_by("seq").values_list("role", "content"))

    response = api_for(alice).put(
        model_url(session), {"choice": choice.format(pk=allowed.pk)}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "model_not_allowed"
    assert "not a model you may pick" in response.json()["detail"]
    session.refresh_from_db()
    assert session.model_endpoint is None and session.model_name == ""
    assert list(session.messages.order_by("seq").values_list("role", "content")) == before
    turn(alice, session, "Still the agent's?")
    assert fake_openai.requests[-1]["model"] == "gpt-4o-mini"


def test_a_stranger_cannot_change_another_users_session_model(
    alice, bob, session, fake_openai, allowed
):
    choice = f"{allowed.pk}:{SMALL}"
    response = api_for(bob).put(model_url(session), {"choice": choice}, format="json")
    assert response.status_code == 404
    session.refresh_from_db()
    assert session.model_endpoint is None and session.model_name == ""


def test_a_pick_the_operator_withdraws_falls_back_to_the_agents_model(
    alice, session, fake_openai, other_server, allowed
):
    api_for(alice).put(model_url(session), {"choice": f"{allowed.pk}:{SMALL}"}, format="json")
    allowed.user_model_names = ""
    allowed.save()

    turn(alice, session, "Who answers?")

    assert other_server.requests == []
    assert fake_openai.requests[-1]["model"] == "gpt-4o-mini"
    assert api_for(alice).get(model_url(session)).json()["choice"] == ""


def test_without_models_to_pick_the_page_shows_no_picker(alice, session, fake_openai):
    page = APIClient()
    page.force_login(alice)
    html = page.get(f"/sessions/{session.pk}/").content.decode()
    assert "Model: gpt-4o-mini" in html and 'id="model-choice"' not in html


def test_the_page_shows_the_picker_with_the_sessions_pick(alice, session, fake_openai, allowed):
    api_for(alice).put(model_url(session), {"choice": f"{allowed.pk}:{SMALL}"}, format="json")
    page = APIClient()
    page.force_login(alice)
    html = page.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="model-choice"' in html and f"Model: {SMALL}" in html
    assert f'value="{allowed.pk}:{SMALL}" selected' in html


def test_the_operator_may_allow_only_models_the_endpoint_serves(client, db):
    operator = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(operator)
    response = client.post(
        "/admin/memory/modelendpoint/add/",
        {
            "name": "Box",
            "base_url": "http://127.0.0.1:9/v1",
            "model_names": "served-model",
            "user_model_names": "served-model\nimagined-model",
            "api_key_env": "",
            "api_key_file": "",
        },
    )
    assert response.status_code == 200  # the form again, with the error
    assert "Not among its models above: imagined-model" in response.content.decode()
    assert not ModelEndpoint.objects.exists()


# --- the session's model for drift, summaries and fact capture ---------------------------


def test_drift_and_the_summary_ask_the_sessions_model_not_the_deployments(
    alice, session, fake_openai, other_server, allowed, settings
):
    settings.DRIFT_DETECTOR = "llm"
    other_server.routes["drift_verdict"] = lambda body: '{"drifted": false}'
    api_for(alice).put(model_url(session), {"choice": f"{allowed.pk}:{SMALL}"}, format="json")
    converse(session, SUBJECT_A)

    outcome = run_evaluation(session_id=session.pk, reason="test")

    assert outcome.action == "refreshed"
    assert [body["model"] for body in other_server.routed] == [SMALL]  # the drift call
    summary = other_server.requests[-1]
    assert summary["model"] == SMALL
    assert summary["response_format"]["json_schema"]["name"] == "topic_summary"
    assert fake_openai.requests == [] and fake_openai.routed == []


def test_drift_asks_the_agents_endpoint_when_the_session_has_no_pick(
    session, fake_openai, other_server, allowed, settings
):
    settings.DRIFT_DETECTOR = "llm"
    other_server.routes["drift_verdict"] = lambda body: '{"drifted": false}'
    session.agent.endpoint = allowed
    session.agent.summary_model_name = "big-model"
    session.agent.save()
    converse(session, SUBJECT_A)

    run_evaluation(session_id=session.pk, reason="test")

    assert [body["model"] for body in other_server.routed] == ["big-model"]
    assert fake_openai.requests == [] and fake_openai.routed == []


def test_fact_capture_asks_the_sessions_model(
    alice, session, fake_openai, other_server, allowed, settings
):
    settings.DRIFT_DETECTOR = "lexical"
    settings.EVALUATION_FACT_CAPTURE = True
    settings.PROMOTION_SECOND_LOOK = "off"
    other_server.routes["user_facts"] = lambda body: '{"facts": []}'
    api_for(alice).put(model_url(session), {"choice": f"{allowed.pk}:{SMALL}"}, format="json")
    converse(session, SUBJECT_A)
    other_server.reply_json(
        {"title": "Balcony garden", "summary": "Plans a balcony garden.", "include_in_memory": True}
    )

    run_evaluation(session_id=session.pk, reason="test")

    assert [body["model"] for body in other_server.routed] == [SMALL]  # the capture call
    assert fake_openai.requests == [] and fake_openai.routed == []


def test_admin_shows_the_users_pick_and_never_offers_to_change_it(
    client, alice, session, fake_openai, allowed
):
    api_for(alice).put(model_url(session), {"choice": f"{allowed.pk}:{SMALL}"}, format="json")
    operator = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(operator)
    html = client.get(f"/admin/memory/session/{session.pk}/change/").content.decode()
    assert SMALL in html
    assert 'name="model_endpoint"' not in html and 'name="model_name"' not in html
