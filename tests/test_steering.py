"""Memory people can steer: what enters memory, what sticks, and the user's corrections.

Through the real client against the fake OpenAI server, real PostgreSQL and the REST API.
"""

import json
import threading

import pytest
from django.db import connection, transaction

from memory.actions.context import assemble_context
from memory.actions.curation import do_agent_curation, do_user_curation
from memory.actions.summarize import do_summarize_topic
from memory.actions.tools import dispatch_tool_calls
from memory.actions.topics import do_new_topic
from memory.lib.errors import EMPTY_TOPIC_ERROR
from memory.lib.text import UNTITLED_TOPIC as UNTITLED
from memory.models import MemoryDecision, MemoryState, Message, Session, Topic
from tests.evaluation_helpers import SUBJECT_A, converse, say, summary_answer
from tests.memory_builders import add_tool_round


@pytest.fixture
def other_session(alice, agent):
    """Another session of alice's with the same agent: it sees the first one's memory."""
    return Session.objects.start(user=alice, agent=agent)


def stable(session):
    return assemble_context(session=session).layer("stable").text


def refreshed(topic):
    topic.refresh_from_db()
    return topic


def agent_call(session, name, arguments):
    from memory.llm import ToolCall

    [message] = dispatch_tool_calls(
        session=session,
        tool_calls=[ToolCall(id="call-x", name=name, arguments=json.dumps(arguments))],
    )
    return json.loads(message.content)


def patch(client, url, body):
    return client.patch(url, data=json.dumps(body), content_type="application/json")


# --- the count the spec means -------------------------------------------------------------


def test_one_question_and_three_tool_rounds_stay_out_of_memory(fake_openai, session):
    say(session, "user", "Which database did we pick for the ledger?")
    for round_ in range(3):
        add_tool_round(session, ["notes"], tag=f"r{round_}")
    say(session, "assistant", "PostgreSQL, as your notes say.")
    assert session.messages.count() == 8  # 1 question, 3 × (call + result), 1 reply
    fake_openai.reply_json(summary_answer(title="Ledger DB", keep=True))

    topic = do_summarize_topic(topic_id=session.active_topic().pk)

    assert topic.title == "Ledger DB"  # the summary was made and applied
    assert topic.keep_in_memory is False  # 2 conversation messages < MIN_MEMORY_TURNS
    assert not MemoryDecision.objects.exists()


# --- nothing enters memory untitled ------------------------------------------------------


def test_a_user_promotion_of_an_unsummarized_topic_is_summarized_first(
    fake_openai, session, other_session, as_alice
):
    converse(session, SUBJECT_A)
    topic = session.active_topic()
    assert topic.title == "" and topic.summary == ""
    fake_openai.reply_json(summary_answer(keep=False))

    answer = as_alice.put(
        f"/agents-api/topics/{topic.pk}/memory",
        data=json.dumps({"state": "promoted"}),
        content_type="application/json",
    )

    assert answer.status_code == 200, answer.content
    assert answer.json()["title"] == "Balcony garden"
    assert answer.json()["memory_state"] == "promoted"
    assert len(fake_openai.requests) == 1
    memory = stable(other_session)
    assert f"[#{topic.pk}] Balcony garden: Balcony veg (tomato, basil)." in memory
    assert UNTITLED not in memory


def test_the_agents_promotion_of_an_unsummarized_topic_never_shows_untitled(
    fake_openai, session, other_session
):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Balcony plan", keep=False))

    result = agent_call(session, "manage_topic_memory", {"action": "promote"})

    assert result["title"] == "Balcony plan" and result["memory_state"] == "promoted"
    memory = stable(other_session)
    assert "Balcony plan" in memory and UNTITLED not in memory


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("who", ["user", "agent"])
def test_the_summary_call_of_a_promotion_holds_no_row_lock(fake_openai, session, alice, who):
    """While the model is thinking, another transaction can lock the topic at once."""
    converse(session, SUBJECT_A)
    topic = session.active_topic()
    fake_openai.reply_json(summary_answer(), delay=1.5)
    errors = []

    def promote():
        try:
            if who == "user":
                do_user_curation(topic=topic, state=MemoryState.PROMOTED, user=alice)
            else:  # through the tool dispatcher, as a turn runs it
                assert agent_call(session, "manage_topic_memory", {"action": "promote"})["ok"]
        except Exception as err:  # reported below
            errors.append(err)
        finally:
            connection.close()

    worker = threading.Thread(target=promote)
    worker.start()
    try:
        for _ in range(100):
            if fake_openai.requests:
                break
            threading.Event().wait(0.02)
        assert fake_openai.requests, "the summary call never started"
        with transaction.atomic():  # NOWAIT: fails at once if anyone holds the row
            Topic.objects.select_for_update(nowait=True).get(pk=topic.pk)
            Session.objects.select_for_update(nowait=True).get(pk=session.pk)
    finally:
        worker.join(10)
    assert not errors
    assert refreshed(topic).memory_state == MemoryState.PROMOTED


@pytest.mark.parametrize("state", ["promoted", "deprecated"])
def test_an_empty_topic_cannot_enter_memory(session, other_session, as_alice, state):
    topic = session.active_topic()
    answer = as_alice.put(
        f"/agents-api/topics/{topic.pk}/memory",
        data=json.dumps({"state": state}),
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert answer.json() == {"detail": EMPTY_TOPIC_ERROR, "code": "curation_refused"}
    assert refreshed(topic).memory_state == MemoryState.NONE
    assert not topic.keep_in_memory_manually_set
    assert "DEPRECATED" not in stable(other_session) and UNTITLED not in stable(other_session)


@pytest.mark.parametrize("action", ["promote", "deprecate"])
def test_the_agent_cannot_put_an_empty_topic_into_memory(session, action):
    result = agent_call(session, "manage_topic_memory", {"action": action})
    assert result == {"error": EMPTY_TOPIC_ERROR}
    # The tool call's own result message is no conversation: the topic is still empty.
    assert refreshed(session.active_topic()).memory_state == MemoryState.NONE


def test_an_empty_topic_can_still_be_taken_out_of_memory(session, alice):
    topic = session.active_topic()
    Topic.objects.filter(pk=topic.pk).update(title="Legacy", keep_in_memory=True)
    do_user_curation(topic=topic, state=MemoryState.NONE, user=alice)
    assert refreshed(topic).memory_state == MemoryState.NONE


# --- the agent's promote sticks until new evidence ---------------------------------------


def test_the_agents_explicit_promote_survives_a_summary_until_the_user_writes_again(
    fake_openai, session
):
    converse(session, SUBJECT_A)
    topic = session.active_topic()
    Topic.objects.filter(pk=topic.pk).update(title="Garden", summary="Balcony veg.")
    result = agent_call(session, "manage_topic_memory", {"action": "promote"})
    assert result["memory_state"] == "promoted"
    say(session, "assistant", "I will remember your garden plan.")  # the same turn's reply

    fake_openai.reply_json(summary_answer(keep=False))
    assert do_summarize_topic(topic_id=topic.pk).keep_in_memory is True
    assert not MemoryDecision.objects.filter(actor="summarizer").exists()

    say(session, "user", "Actually, forget the garden: I am moving out.")
    fake_openai.reply_json(summary_answer(keep=False))
    assert do_summarize_topic(topic_id=topic.pk).keep_in_memory is False
    trail = list(MemoryDecision.objects.order_by("pk").values_list("actor", "to_state"))
    assert trail == [("agent", "promoted"), ("summarizer", "none")]


def test_a_later_decision_ends_the_agents_promise(fake_openai, session):
    converse(session, SUBJECT_A)
    topic = session.active_topic()
    Topic.objects.filter(pk=topic.pk).update(title="Garden", summary="Balcony veg.")
    do_agent_curation(topic=topic, action="promote")
    assert refreshed(topic).agent_promoted_through_seq == 6
    do_agent_curation(topic=topic, action="demote")
    assert refreshed(topic).agent_promoted_through_seq is None


# --- corrections stick -------------------------------------------------------------------


def test_the_user_edits_a_topic_and_every_other_session_sees_it_at_once(
    session, other_session, as_alice
):
    converse(session, SUBJECT_A)
    topic = session.active_topic()
    Topic.objects.filter(pk=topic.pk).update(title="DB choice", summary="We chose MySQL.")
    do_agent_curation(topic=topic, action="promote")
    assert "We chose MySQL." in stable(other_session)  # the cache holds the old text

    answer = patch(
        as_alice,
        f"/agents-api/topics/{topic.pk}",
        {"title": "DB choice", "summary": "We chose PostgreSQL (MySQL was reversed)."},
    )

    assert answer.status_code == 200, answer.content
    assert answer.json()["summary_manually_set"] is True
    memory = stable(other_session)
    assert "We chose PostgreSQL (MySQL was reversed)." in memory and "We chose MySQL." not in memory
    edit = MemoryDecision.objects.get(action="edit")
    assert (edit.actor, edit.user.username, edit.topic_title) == ("user", "alice", "DB choice")


@pytest.mark.parametrize("incremental", [True, False])
def test_an_edited_summary_survives_a_refresh_with_no_new_message_and_seeds_the_next(
    fake_openai, settings, session, as_alice, incremental
):
    settings.SUMMARY_INCREMENTAL = incremental
    converse(session, SUBJECT_A)
    topic = session.active_topic()
    fake_openai.reply_json(summary_answer(summary="Balcony veg: tomatoes."))
    do_summarize_topic(topic_id=topic.pk)
    patch(as_alice, f"/agents-api/topics/{topic.pk}", {"summary": "Balcony veg: NO tomatoes."})

    # A refresh of the same messages keeps the edit, in either policy, without a call: the
    # user's text covers every message so far.
    do_summarize_topic(topic_id=topic.pk, reason="refresh")
    assert refreshed(topic).summary == "Balcony veg: NO tomatoes."
    assert topic.summary_manually_set
    assert len(fake_openai.requests) == 1

    # A new message: the next summary is made from the user's text and replaces it.
    say(session, "user", "Add basil too.")
    fake_openai.reply_json(summary_answer(summary="Balcony veg: no tomatoes, basil."))
    do_summarize_topic(topic_id=topic.pk, reason="refresh")
    request = fake_openai.requests[-1]
    sent = request["messages"][1]["content"]
    assert "Balcony veg: NO tomatoes." in sent and "Add basil too." in sent
    assert "tomato pots" not in sent  # only what is new comes with the user's text
    assert refreshed(topic).summary == "Balcony veg: no tomatoes, basil."
    assert not topic.summary_manually_set


def test_a_new_topic_keeps_the_users_edit_of_the_prior_one(fake_openai, session, as_alice):
    converse(session, SUBJECT_A)
    topic = session.active_topic()
    patch(as_alice, f"/agents-api/topics/{topic.pk}", {"title": "Mine", "summary": "My words."})
    fake_openai.reply_json(summary_answer(title="Theirs", summary="Model words."))

    do_new_topic(session=session)

    topic = refreshed(topic)
    assert (topic.title, topic.summary, topic.is_active) == ("Mine", "My words.", False)


@pytest.mark.parametrize(
    "body, problem",
    [
        ({"title": "   "}, "a topic needs a title"),
        ({"title": "x" * 201}, "title has 201 characters; the limit is 200"),
        ({"summary": "x" * 8001}, "summary has 8001 characters; the limit is 8000"),
        ({"title": 5}, "title must be text, not a number"),
        ({}, "send a title, a summary, or both"),
        ({"title": None}, "may not be null"),
    ],
)
def test_a_bad_edit_is_refused_and_changes_nothing(session, as_alice, body, problem):
    topic = session.active_topic()
    Topic.objects.filter(pk=topic.pk).update(title="Kept", summary="Kept too.")
    answer = patch(as_alice, f"/agents-api/topics/{topic.pk}", body)
    assert answer.status_code == 400
    assert problem in json.dumps(answer.json())
    topic = refreshed(topic)
    assert (topic.title, topic.summary, topic.summary_manually_set) == ("Kept", "Kept too.", False)
    assert not MemoryDecision.objects.exists()


def test_a_stranger_can_neither_read_nor_edit_a_topic(session, as_bob):
    topic = session.active_topic()
    assert as_bob.get(f"/agents-api/topics/{topic.pk}").status_code == 404
    answer = patch(as_bob, f"/agents-api/topics/{topic.pk}", {"title": "Bob was here"})
    assert answer.status_code == 404
    assert refreshed(topic).title == ""


def test_the_owner_reads_one_topic(session, as_alice):
    topic = session.active_topic()
    answer = as_alice.get(f"/agents-api/topics/{topic.pk}")
    assert answer.status_code == 200
    assert answer.json()["id"] == topic.pk and answer.json()["session_id"] == session.pk


def test_the_topics_own_messages_are_untouched_by_an_edit(session, as_alice):
    converse(session, SUBJECT_A)
    topic = session.active_topic()
    before = list(Message.objects.filter(topic=topic).values_list("pk", "content"))
    patch(as_alice, f"/agents-api/topics/{topic.pk}", {"title": "Garden"})
    assert list(Message.objects.filter(topic=topic).values_list("pk", "content")) == before


def test_a_topic_nothing_can_be_titled_from_is_refused_until_the_user_names_it(
    session, alice, as_alice
):
    say(session, "assistant", "Welcome back!")  # no user words to make a title from
    topic = session.active_topic()
    url = f"/agents-api/topics/{topic.pk}/memory"
    body = json.dumps({"state": "promoted"})

    refused = as_alice.put(url, data=body, content_type="application/json")

    assert refused.status_code == 400 and "give it a title" in refused.json()["detail"]
    assert refreshed(topic).memory_state == MemoryState.NONE
    patch(as_alice, f"/agents-api/topics/{topic.pk}", {"title": "Greeting"})
    accepted = as_alice.put(url, data=body, content_type="application/json")
    assert accepted.status_code == 200 and accepted.json()["title"] == "Greeting"
