"""The server-rendered pages: log in, the session list, starting a session, the chat page."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memory.models import Agent, Message, Organization, Session


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def embedded(response, name: str) -> dict:
    found = re.search(
        rf'<script id="{name}" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.DOTALL,
    )
    assert found, f"the page embeds {name}"
    return json.loads(found.group(1))


def initial_state(response) -> dict:
    return embedded(response, "driftless-initial")


def page_config(response) -> dict:
    return embedded(response, "driftless-config")


@pytest.mark.parametrize("path", ["/", "/sessions/1/"])
def test_pages_need_a_login(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response.url.startswith("/login/?next=")


def test_the_login_page_logs_in_and_goes_home(client, alice):
    assert client.get("/login/").status_code == 200
    response = client.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302 and response.url == "/"
    assert client.get("/").status_code == 200


def test_a_wrong_password_says_so(client, alice):
    response = client.post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "didn't match" in response.content.decode()


def test_logging_out_ends_the_session(as_alice):
    response = as_alice.post("/logout/")
    assert response.status_code == 302
    assert as_alice.get("/").status_code == 302


def test_home_lists_only_your_own_sessions(as_alice, alice, bob, agent):
    mine = Session.objects.start(user=alice, agent=agent, title="Alice plans a trip")
    Session.objects.start(user=bob, agent=agent, title="Bob's secret project")

    page = as_alice.get("/").content.decode()

    assert "Alice plans a trip" in page
    assert f'href="/sessions/{mine.pk}/"' in page
    assert "Bob" not in page


def test_home_offers_only_agents_of_your_organizations(as_alice, agent):
    other = Organization.objects.create(name="Other", slug="other")
    Agent.objects.create(organization=other, name="Stranger agent", soul="x")

    page = as_alice.get("/").content.decode()

    assert f'name="agent" value="{agent.pk}"' in page
    assert "Stranger agent" not in page


def test_starting_a_session_opens_its_chat_page(as_alice, alice, agent):
    response = as_alice.post("/sessions/start/", {"agent": agent.pk})
    session = Session.objects.get(user=alice)
    assert response.status_code == 302 and response.url == f"/sessions/{session.pk}/"
    assert session.agent == agent and session.topics.filter(is_active=True).count() == 1


@pytest.mark.parametrize("agent_id", ["other-org", "missing", "garbage", ""])
def test_starting_a_session_with_an_agent_not_yours_is_refused(as_alice, alice, agent_id):
    other = Organization.objects.create(name="Other", slug="other")
    foreign = Agent.objects.create(organization=other, name="Foreign", soul="x")
    value = {"other-org": foreign.pk, "missing": 999999, "garbage": "abc", "": ""}[agent_id]

    response = as_alice.post("/sessions/start/", {"agent": value})

    assert response.status_code == 404
    assert not Session.objects.filter(user=alice).exists()


def test_starting_a_session_is_a_post(as_alice, agent):
    assert as_alice.get("/sessions/start/").status_code == 405


def test_someone_elses_chat_page_is_a_404(client, bob, session):
    client.force_login(bob)
    assert client.get(f"/sessions/{session.pk}/").status_code == 404


def test_a_missing_chat_page_is_a_404(as_alice):
    assert as_alice.get("/sessions/424242/").status_code == 404


def test_the_chat_page_carries_the_topics_and_the_active_conversation(as_alice, session):
    first = session.active_topic()
    session.append_message(role=Message.Role.USER, content="Hello there")
    session.append_message(role=Message.Role.ASSISTANT, content="Hi! **Welcome**.")

    response = as_alice.get(f"/sessions/{session.pk}/")

    assert response.status_code == 200
    state = initial_state(response)
    assert state["session"]["id"] == session.pk
    assert state["session"]["agent_name"] == "Drift"
    assert [t["id"] for t in state["topics"]] == [first.pk]
    assert state["topics"][0]["is_active"] is True
    assert [m["content"] for m in state["messages"]] == ["Hello there", "Hi! **Welcome**."]
    # The reply comes rendered (and sanitized) by the server; the page parses no Markdown.
    assert state["messages"][1]["content_html"] == "<p>Hi! <strong>Welcome</strong>.</p>\n"
    assert state["messages"][0]["content_html"] == ""
    config = page_config(response)
    assert config["csrfToken"] and config["session_id"] == session.pk
    assert config["limits"]["messageChars"] == 16000


def test_the_pages_scripts_get_every_url_from_the_server(as_alice, session):
    """The scripts write no URL: each one is a template reversed from its route."""
    urls = page_config(as_alice.get(f"/sessions/{session.pk}/"))["urls"]
    assert urls["topicMessages"] == "/agents-api/topics/{topic_id}/messages"
    assert urls["sessionFact"] == "/agents-api/sessions/{session_id}/facts/{key}"
    assert urls["chatPage"] == "/sessions/{session_id}/"
    assert urls["socket"] == "/ws/sessions/{session_id}/"
    for name, template in urls.items():
        assert "987654" not in template and "sentinel" not in template, name


def test_message_content_cannot_break_out_of_the_embedded_state(as_alice, session):
    hostile = '</script><script>alert("x")</script><img src=x onerror=alert(1)>'
    session.append_message(role=Message.Role.USER, content=hostile)

    response = as_alice.get(f"/sessions/{session.pk}/")
    page = response.content.decode()

    assert "<script>alert(" not in page
    assert "<img src=x" not in page
    assert initial_state(response)["messages"][0]["content"] == hostile


def test_the_chat_page_shows_only_the_active_topics_messages(as_alice, session):
    session.append_message(role=Message.Role.USER, content="about lunch")
    earlier = session.active_topic()
    earlier.is_active = False
    earlier.save()
    current = session.topics.create(origin="user")
    session.append_message(role=Message.Role.USER, content="about databases")

    state = initial_state(as_alice.get(f"/sessions/{session.pk}/"))

    assert [t["id"] for t in state["topics"]] == [earlier.pk, current.pk]
    assert [m["content"] for m in state["messages"]] == ["about databases"]


EMBEDDED_WALKTHROUGH = """
import json
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client
from memory.models import Agent

assert settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")
assert "InMemoryChannelLayer" in settings.CHANNEL_LAYERS["default"]["BACKEND"]
call_command("migrate", verbosity=0)
call_command("seed_demo")
c = Client()
assert c.get("/login/").status_code == 200
assert c.post("/login/", {"username": "demo", "password": "demo-password"}).status_code == 302
assert c.get("/").status_code == 200
started = c.post("/sessions/start/", {"agent": Agent.objects.get().pk})
assert started.status_code == 302, started.status_code
assert c.get(started.url).status_code == 200
sid = int(started.url.strip("/").split("/")[-1])
put = lambda url, body: c.put(url, json.dumps(body), content_type="application/json")
topic = c.get(f"/agents-api/sessions/{sid}/topics/").json()[0]["id"]
reply = c.post(f"/agents-api/sessions/{sid}/messages", {"content": "hello"}, "application/json")
assert reply.status_code == 201, reply.content
assert put(f"/agents-api/topics/{topic}/memory", {"state": "promoted"}).status_code == 200
assert put(f"/agents-api/sessions/{sid}/facts/colour", {"value": "teal"}).status_code == 200
for url in ["memory", "facts", "context"]:
    assert c.get(f"/agents-api/sessions/{sid}/{url}").status_code == 200, url
assert c.get(f"/agents-api/topics/{topic}/notes").status_code == 200
assert c.post(f"/agents-api/sessions/{sid}/evaluate").status_code == 202
for name in ["css/app.css", "js/chat.js", "js/render.js", "img/favicon.svg"]:
    assert finders.find(name), name
print("EMBEDDED OK")
"""


def test_every_page_and_panel_endpoint_works_on_the_embedded_default(tmp_path):
    """What `make run` serves: SQLite, in-process layers, the offline model."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "OPENAI_API_KEY"}
    }
    env.update(DEBUG="true", DRIFTLESS_VAR_DIR=str(tmp_path), ALLOWED_HOSTS="testserver")
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", EMBEDDED_WALKTHROUGH],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "EMBEDDED OK" in result.stdout


@pytest.mark.parametrize("page", ["home", "chat"])
def test_pages_with_live_state_are_never_cached(as_alice, session, page):
    """A Back button must re-read the page, not show the copy from before the last message."""
    response = as_alice.get("/" if page == "home" else f"/sessions/{session.pk}/")
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]


def test_home_counts_the_messages_the_thread_shows_and_says_just_now(as_alice, session):
    session.append_message(role=Message.Role.USER, content="Remember my colour")
    call = {"id": "c1", "type": "function", "function": {"name": "notes", "arguments": "{}"}}
    session.append_message(role=Message.Role.ASSISTANT, content="", tool_calls=[call])
    session.append_message(role=Message.Role.TOOL, tool_call_id="c1", content="{}")
    session.append_message(role=Message.Role.ASSISTANT, content="Noted.")

    page = as_alice.get("/").content.decode()

    assert "2 messages · just now" in page
    assert "0 minutes" not in page and "4 messages" not in page


def test_an_older_session_says_how_long_ago(as_alice, session):
    from datetime import timedelta

    from django.utils import timezone

    Session.objects.filter(pk=session.pk).update(
        updated_at=timezone.now() - timedelta(hours=3, minutes=5)
    )
    assert "3 hours ago" in as_alice.get("/").content.decode()


def test_the_demo_agent_card_speaks_to_people_not_in_tool_names(as_alice, alice):
    from django.core.management import call_command

    call_command("seed_demo", stdout=open(os.devnull, "w"))
    Agent.objects.get(name="Drift").organization.members.add(alice)
    page = as_alice.get("/").content.decode()
    assert "Drift" in page
    assert "important_info" not in page and "with notes" not in page


def test_the_chat_page_lists_your_sessions_newest_first_and_nobody_elses(
    as_alice, alice, bob, agent, session
):
    from django.utils import timezone

    older = Session.objects.start(user=alice, agent=agent, title="Older plans")
    Session.objects.filter(pk=older.pk).update(updated_at=timezone.now().replace(year=2020))
    Session.objects.start(user=bob, agent=agent, title="Bob's secret project")
    session.active_topic().__class__.objects.filter(pk=session.active_topic().pk).update(
        title="Database choice"
    )

    page = as_alice.get(f"/sessions/{session.pk}/").content.decode()
    listed = re.findall(r'data-session-id="(\d+)" data-name="([^"]*)"', page)
    assert listed == [(str(session.pk), "Database choice"), (str(older.pk), "Older plans")]
    # The list is rendered once, by the server: the fragment the page reads again is it.
    fragment = as_alice.get(f"/sessions/nav/?current={session.pk}").content.decode()
    assert re.findall(r'data-session-id="(\d+)" data-name="([^"]*)"', fragment) == listed
    assert "Bob" not in page and "Bob" not in fragment
    assert 'class="session-item is-current"' in fragment


def test_the_chat_page_opens_on_the_last_page_of_a_long_topic(as_alice, session):
    from chat.api.serializers import MESSAGE_PAGE_SIZE

    for n in range(MESSAGE_PAGE_SIZE + 5):
        session.append_message(role=Message.Role.USER, content=f"message {n}")

    response = as_alice.get(f"/sessions/{session.pk}/")
    state = initial_state(response)
    assert len(state["messages"]) == MESSAGE_PAGE_SIZE == page_config(response)["page_size"]
    assert state["messages"][0]["content"] == "message 5"
    assert state["messages"][-1]["content"] == f"message {MESSAGE_PAGE_SIZE + 4}"
