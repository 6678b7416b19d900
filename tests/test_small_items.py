"""The small items of issue 47: admin counts and names sessions as the user sees them; the
brain legend's "Got it" is kept per user; /favicon.ico is served; an offline consolidation
run says it was offline."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from chat.views import listed_sessions
from memory.models import Session
from tests.memory_builders import add_tool_round, add_topic


@pytest.fixture
def operator(client, db):
    user = get_user_model().objects.create_superuser("operator", "op@example.com", "pw")
    client.force_login(user)
    return user


def test_admin_counts_and_names_a_session_as_the_sidebar_does(client, operator, session, alice):
    session.append_message(role="user", content="Which monitor?")
    add_tool_round(session, ["notes"])
    session.append_message(role="assistant", content="The 27-inch one.")
    session.append_message(role="error", content="a failure")
    topic = session.active_topic()
    topic.title = "Pick a monitor"
    topic.save(update_fields=["title"])
    (listed,) = listed_sessions(alice)

    page = client.get("/admin/memory/session/").content.decode()

    row = re.search(r"<tr.*?</tr>", page.split("<tbody>")[1], re.S).group(0)
    title = re.search(r'<th class="field-shown_title"><a [^>]*>(.*?)</a>', row).group(1)
    assert title == listed.shown_title == "Pick a monitor"
    cells = re.findall(r'<td class="field-shown_messages">(\d+)</td>', row)
    assert cells == [str(listed.shown_messages)]
    assert Session.objects.get(pk=session.pk).message_count > listed.shown_messages


def test_an_offline_consolidation_run_says_it_was_offline(settings, alice, agent, session):
    from memory.actions.consolidation import do_consolidate

    add_topic(session, title="Ledger", summary="On PostgreSQL.", keep=True, messages=2)
    add_topic(session, title="Offsite", summary="In Porto.", keep=True, messages=2)
    settings.OPENAI_BASE_URL = settings.OPENAI_API_KEY = ""

    run = do_consolidate(agent=agent, user=alice)

    assert (run.model_name, run.status) == ("offline", "nothing")
    assert "model proposed" not in run.detail and run.detail.startswith("offline")


def test_favicon_ico_is_served(client, db):
    response = client.get("/favicon.ico")
    assert response.status_code in (200, 301, 302)
    if response.status_code != 200:
        assert client.get(response["Location"]).status_code == 200
