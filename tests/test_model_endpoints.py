"""Models chosen in admin: endpoints the operator declares (never a key in the database),
picked per agent, effective on the next turn with no restart; the operator's "test
connection" says exactly what is wrong; a bad endpoint gives the user a clear error and
loses no message."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from memory.llm.probe import probe
from memory.models import Agent, ModelEndpoint
from tests.fake_openai import FakeOpenAI


@pytest.fixture
def other_server():
    server = FakeOpenAI(default_text="Hello from the other endpoint.")
    yield server
    server.close()


@pytest.fixture
def operator(client, db):
    user = get_user_model().objects.create_superuser("operator", "op@example.com", "pw")
    client.force_login(user)
    return user


def turn(user, session, content: str):
    api = APIClient()
    api.force_authenticate(user)
    return api.post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": content}, format="json"
    )


def change_agent_in_admin(client, agent: Agent, **fields) -> None:
    data = {
        "organization": agent.organization_id,
        "name": agent.name,
        "soul": agent.soul,
        "skills": agent.skills,
        "endpoint": "",
        "model_name": "",
        "summary_model_name": "",
        "temperature": "",
        "memory_token_budget": agent.memory_token_budget,
        **fields,
    }
    response = client.post(f"/admin/memory/agent/{agent.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:2000]


def test_switching_an_agent_to_another_endpoint_in_admin_applies_on_the_next_turn(
    client, operator, alice, session, fake_openai, other_server, monkeypatch
):
    monkeypatch.setenv("OTHER_ENDPOINT_KEY", "other-secret")
    other_server.required_key = "other-secret"
    assert turn(alice, session, "First?").json()["reply"]["content"] == fake_openai.default_text

    endpoint = ModelEndpoint.objects.create(
        name="Other",
        base_url=other_server.base_url,
        model_names="big-model\nsmall-model",
        api_key_env="OTHER_ENDPOINT_KEY",
    )
    change_agent_in_admin(client, session.agent, endpoint=endpoint.pk, model_name="small-model")

    body = turn(alice, session, "Second?").json()
    assert body["reply"]["content"] == "Hello from the other endpoint."
    assert other_server.requests[-1]["model"] == "small-model"
    assert other_server.headers[-1]["authorization"] == "Bearer other-secret"
    assert len(fake_openai.requests) == 1
    # The page's badge names the agent's model.
    page = APIClient()
    page.force_login(alice)
    assert "small-model" in page.get(f"/sessions/{session.pk}/").content.decode()


def test_a_bad_endpoint_gives_the_user_a_clear_error_and_keeps_the_message(
    alice, session, fake_openai
):
    dead = ModelEndpoint.objects.create(
        name="Dead", base_url="http://127.0.0.1:9/v1", model_names="m"
    )
    Agent.objects.filter(pk=session.agent_id).update(endpoint=dead)
    response = turn(alice, session, "Anyone there?")
    assert response.status_code == 502
    assert "127.0.0.1:9" not in response.json()["error"]
    assert list(session.messages.values_list("role", "content")) == [
        ("user", "Anyone there?"),
        ("error", session.messages.get(role="error").content),
    ]


def test_an_agent_model_the_endpoint_does_not_offer_is_refused_in_admin(client, operator, session):
    endpoint = ModelEndpoint.objects.create(
        name="E", base_url="http://127.0.0.1:9/v1", model_names="only-this"
    )
    agent = session.agent
    data = {
        "organization": agent.organization_id,
        "name": agent.name,
        "soul": agent.soul,
        "endpoint": endpoint.pk,
        "model_name": "something-else",
        "memory_token_budget": agent.memory_token_budget,
    }
    response = client.post(f"/admin/memory/agent/{agent.pk}/change/", data)
    assert response.status_code == 200
    assert "E offers only-this" in response.content.decode()


def test_the_key_field_takes_a_variable_name_never_a_key(client, operator):
    response = client.post(
        "/admin/memory/modelendpoint/add/",
        {
            "name": "Leaky",
            "base_url": "https://api.example.com/v1",
            "model_names": "m",
            "api_key_env": "sk-proj-abcdef123456",
        },
    )
    assert response.status_code == 200
    assert not ModelEndpoint.objects.exists()


def test_staff_who_are_not_superusers_never_see_endpoints(client, alice):
    alice.is_staff = True
    alice.save()
    client.force_login(alice)
    ModelEndpoint.objects.create(name="E", base_url="http://10.0.0.5/v1", model_names="m")
    assert client.get("/admin/memory/modelendpoint/").status_code in (403, 404)


def probed(server: FakeOpenAI | None, *, key: str = "", model: str = "m"):
    base_url = server.base_url if server else "http://127.0.0.1:9/v1"
    return probe(base_url=base_url, api_key=key, model=model, key_source="OTHER_KEY", timeout=5)


def test_the_connection_test_says_exactly_what_is_wrong(other_server):
    assert probed(None).message.startswith("Unreachable: nothing answers at http://127.0.0.1:9")
    other_server.required_key = "right"
    refused = probed(other_server, key="wrong")
    assert not refused.ok and refused.message.startswith("Key refused (401)")
    assert "OTHER_KEY" in refused.message
    other_server.required_key = None
    other_server.served_models = ["qwen", "llama"]
    unknown = probed(other_server, model="gpt-9")
    assert not unknown.ok and unknown.message.startswith("Unknown model 'gpt-9'")
    assert "qwen, llama" in unknown.message
    other_server.fail(500, "streaming is broken")
    assert probed(other_server, model="qwen").message.startswith("No streaming")
    other_server.reply_text("OK")
    other_server.fail(400, "tools are not supported")
    no_tools = probed(other_server, model="qwen")
    assert not no_tools.ok and no_tools.message.startswith("No tools")
    good = probed(other_server, model="qwen")
    assert good.ok, good.message
    assert other_server.requests[-1]["tools"][0]["function"]["name"] == "ping"


def test_the_admin_action_reports_the_test(client, operator, other_server):
    other_server.required_key = "right"
    endpoint = ModelEndpoint.objects.create(
        name="Other", base_url=other_server.base_url, model_names="m", api_key_env="UNSET_TEST_KEY"
    )
    response = client.post(
        "/admin/memory/modelendpoint/",
        {"action": "test_connection", "_selected_action": [endpoint.pk]},
        follow=True,
    )
    text = response.content.decode()
    assert "Other: Key refused (401)" in text and "UNSET_TEST_KEY" in text
