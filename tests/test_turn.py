"""The agent turn (memory/actions/turn.py) against the fake OpenAI server and the offline model."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connections

from memory.actions import turn as turn_module
from memory.actions.topics import do_new_topic
from memory.actions.turn import (
    MAX_TOOL_ROUNDS,
    NO_ANSWER_NOTICE,
    NothingToRetry,
    check_retry,
    do_retry_turn,
    do_send_message,
)
from memory.lib.deltas import DeltaBatcher
from memory.llm import Usage
from memory.models import Lease, Session
from memory.stores import leases
from memory.stores.facts import read_facts
from memory.stores.leases import TurnBusy, session_lock
from memory.stores.messages import usage_totals
from tests.event_shapes import checked_recorder


@pytest.fixture
def events(monkeypatch, published):
    """Every event the turn publishes, immediate or on commit, in order (schema-checked)."""
    seen: list[dict] = []
    monkeypatch.setattr(turn_module, "publish", checked_recorder(published, seen))
    monkeypatch.setattr(turn_module, "publish_on_commit", checked_recorder(published, seen))
    return seen


def roles(session) -> list[str]:
    return list(session.messages.order_by("seq").values_list("role", flat=True))


def test_it_stores_the_user_message_then_the_streamed_reply_with_its_usage(
    session, fake_openai, events
):
    fake_openai.reply_text(
        "Hello there, Alice.",
        usage=Usage(prompt_tokens=120, cached_tokens=100, completion_tokens=5),
    )

    result = do_send_message(session=session, content="Hi!")

    assert roles(session) == ["user", "assistant"]
    assert result.user_message.content == "Hi!"
    reply = result.reply
    assert reply.content == "Hello there, Alice."
    assert (reply.prompt_tokens, reply.cached_tokens, reply.completion_tokens) == (120, 100, 5)
    assert reply.model_name == "gpt-4o-mini"
    assert result.failure is None and result.activity == []
    deltas = [e["delta"] for e in events if e["type"] == "reply.delta"]
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, Alice."
    assert {e["turn_id"] for e in events if e["type"] == "reply.delta"} == {result.turn_id}
    assert [e["type"] for e in events if e["type"].startswith("turn.")] == [
        "turn.started",
        "turn.done",
    ]


@pytest.mark.django_db(transaction=True)  # events leave on commit
def test_a_turns_start_and_end_each_reach_the_clients_in_one_delivery(
    session, fake_openai, published
):
    fake_openai.reply_text("Hello there, Alice.")

    do_send_message(session=session, content="Hi!")

    first, *middle, last = published.deliveries
    assert first == ["message.created", "turn.started"]  # before the model is asked
    assert middle and all(types == ["reply.delta"] for types in middle)
    # the reply's last piece leaves with its end: one delivery less (issue 43)
    assert last == ["reply.delta", "message.created", "turn.done"]


@pytest.mark.django_db(transaction=True)  # events leave on commit
def test_a_tool_round_shows_the_call_and_its_result_before_the_model_is_asked_again(
    session, fake_openai, published
):
    fake_openai.reply_tool_calls([("important_info", {"operation": "read"})])
    fake_openai.reply_text("You have no facts yet.")

    do_send_message(session=session, content="What do you know about me?")

    assert [types for types in published.deliveries if types != ["reply.delta"]] == [
        ["message.created", "turn.started"],
        ["message.created", "message.created"],  # the call and its result
        ["reply.delta", "message.created", "turn.done"],
    ]


LONG_REPLY = " ".join(f"word{number} ünïcode 🌿" for number in range(60))


@pytest.mark.parametrize("batch_seconds", [0.1, 0.0])
def test_reply_deltas_are_coalesced_into_few_events_that_join_to_the_whole_reply(
    session, fake_openai, events, settings, batch_seconds
):
    settings.STREAM_BATCH_SECONDS = batch_seconds
    fake_openai.reply_text(LONG_REPLY)  # 180 word deltas, streamed at once

    do_send_message(session=session, content="Tell me a long story")

    deltas = [e["delta"] for e in events if e["type"] == "reply.delta"]
    assert "".join(deltas) == LONG_REPLY
    if batch_seconds:
        assert deltas[0] == "word0"  # the first piece is not held back
        assert len(deltas) < 180  # how few depends on the machine's speed: see below
    else:
        assert len(deltas) == 180  # the per-token path: one event per streamed word


def test_the_batcher_sends_the_first_piece_at_once_then_one_event_per_window():
    """On a clock of its own, so the count does not depend on a loaded machine."""
    now = [0.0]
    sent: list[str] = []
    batcher = DeltaBatcher(sent.append, seconds=0.1, clock=lambda: now[0])
    for step, piece in enumerate("abcdefghij"):
        now[0] = step * 0.03  # a piece every 30 ms
        batcher.add(piece)
    batcher.flush()
    assert sent == ["a", "bcde", "fghi", "j"]


def test_it_sends_the_scope_prompt_cache_key_and_the_assembled_stack(session, fake_openai):
    do_send_message(session=session, content="Hi!")

    request = fake_openai.requests[0]
    assert request["prompt_cache_key"] == session.prompt_cache_key
    assert request["messages"][0]["role"] == "system"
    assert request["messages"][0]["content"].startswith("You are Drift.")
    assert request["messages"][-1] == {"role": "user", "content": "Hi!"}
    names = [tool["function"]["name"] for tool in request["tools"]]
    assert names == ["notes", "important_info", "manage_topic_memory", "recall"]


def test_a_tool_call_round_trip_stores_the_fact_and_shows_the_model_the_result(
    session, alice, agent, fake_openai
):
    (call_id,) = fake_openai.reply_tool_calls(
        [("important_info", {"operation": "$set", "key": "tea", "value": "green"})]
    )
    fake_openai.reply_text("I'll remember that you like green tea.")

    result = do_send_message(session=session, content="I drink green tea.")

    assert read_facts(user=alice, agent=agent) == {"tea": "green"}
    assert roles(session) == ["user", "assistant", "tool", "assistant"]
    call_message, tool_message = result.activity
    assert call_message.tool_calls[0]["id"] == call_id
    assert call_message.tool_calls[0]["function"]["name"] == "important_info"
    assert tool_message.tool_call_id == call_id
    assert json.loads(tool_message.content)["ok"] is True
    second = fake_openai.requests[1]["messages"]
    assert second[-2]["role"] == "assistant" and second[-2]["tool_calls"][0]["id"] == call_id
    assert second[-1] == {"role": "tool", "tool_call_id": call_id, "content": tool_message.content}
    assert result.reply.content == "I'll remember that you like green tea."


def test_tool_call_usage_is_stored_on_each_model_answer_and_summed_for_the_turn(
    session, fake_openai
):
    fake_openai.reply_tool_calls(
        [("notes", {"operation": "$set", "content": "decided: teal"})],
        usage=Usage(prompt_tokens=50, cached_tokens=0, completion_tokens=7),
    )
    fake_openai.reply_text(
        "Noted.", usage=Usage(prompt_tokens=60, cached_tokens=40, completion_tokens=2)
    )

    result = do_send_message(session=session, content="Note that we chose teal.")

    assert result.activity[0].prompt_tokens == 50
    assert result.reply.prompt_tokens == 60
    assert result.usage == Usage(prompt_tokens=110, cached_tokens=40, completion_tokens=9)


def test_the_stable_prefix_is_byte_identical_across_turns_and_usage_is_summed(session, fake_openai):
    fake_openai.reply_text(
        "One.", usage=Usage(prompt_tokens=200, cached_tokens=0, completion_tokens=3)
    )
    fake_openai.reply_text(
        "Two.", usage=Usage(prompt_tokens=230, cached_tokens=192, completion_tokens=4)
    )

    do_send_message(session=session, content="First question")
    do_send_message(session=session, content="Second question")

    first, second = fake_openai.requests
    assert json.dumps(first["messages"][0]) == json.dumps(second["messages"][0])
    assert json.dumps(first["tools"]) == json.dumps(second["tools"])
    assert first["prompt_cache_key"] == second["prompt_cache_key"]
    # The second request extends the first: the earlier exchange is part of its prefix.
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert usage_totals(session_id=session.pk) == {
        "prompt_tokens": 430,
        "cached_tokens": 192,
        "completion_tokens": 7,
        "cache_hit_ratio": round(192 / 430, 4),
    }


def test_a_model_failure_keeps_the_user_message_records_the_error_and_tells_the_clients(
    session, fake_openai, events
):
    fake_openai.fail(503, "the model is down")

    result = do_send_message(session=session, content="Are you there?")

    assert result.failure == "model" and result.reply is None
    assert roles(session) == ["user", "error"]
    assert result.user_message.content == "Are you there?"
    # What went wrong, with an error id; the provider's own text is in the log only.
    assert "model endpoint returned HTTP 503" in result.error.content
    assert "the model is down" not in result.error.content
    (error,) = [e for e in events if e["type"] == "turn.error"]
    assert error["turn_id"] == result.turn_id and error["retryable"] is True
    assert "HTTP 503" in error["error"]
    assert events[-1] == {
        "type": "turn.done",
        "turn_id": result.turn_id,
        "reply_message_id": None,
        "ok": False,
        "stopped": False,
    }


def test_a_failure_mid_stream_after_some_deltas_still_keeps_the_message(
    session, fake_openai, events
):
    fake_openai.fail_mid_stream(content="this reply will be cut off soon", after=2)

    result = do_send_message(session=session, content="Tell me a story")

    assert [e["type"] for e in events].count("reply.delta") == 2
    assert result.failure == "model"
    assert roles(session) == ["user", "error"]


def test_retry_answers_the_latest_user_message_without_storing_it_again(session, fake_openai):
    fake_openai.fail(503, "overloaded")
    fake_openai.reply_text("Here I am.")
    failed = do_send_message(session=session, content="Are you there?")

    result = do_retry_turn(session=session)

    assert result.user_message.pk == failed.user_message.pk
    assert result.reply.content == "Here I am."
    assert roles(session) == ["user", "error", "assistant"]
    # The error record never reaches the model (the prefix, today's date, the question).
    assert [m["role"] for m in fake_openai.requests[1]["messages"]] == ["system", "system", "user"]


def test_retry_is_refused_when_the_last_message_already_has_its_reply(session, fake_openai):
    do_send_message(session=session, content="Hi")

    with pytest.raises(NothingToRetry):
        do_retry_turn(session=session)
    assert len(fake_openai.requests) == 1


def test_retry_is_refused_in_a_topic_without_a_user_message(session):
    with pytest.raises(NothingToRetry):
        check_retry(session=session)


def test_after_the_last_tool_round_the_model_is_asked_without_tools_and_answers(
    session, fake_openai
):
    for number in range(MAX_TOOL_ROUNDS):  # different calls: none is a repeat
        fake_openai.reply_tool_calls(
            [("important_info", {"operation": "read", "key": f"k{number}"})]
        )
    fake_openai.reply_text("I looked everywhere: nothing is stored yet.")

    result = do_send_message(session=session, content="Loop forever")

    assert len(fake_openai.requests) == MAX_TOOL_ROUNDS + 1
    assert all("tools" in request for request in fake_openai.requests[:-1])
    assert "tools" not in fake_openai.requests[-1]
    assert len(result.activity) == 2 * MAX_TOOL_ROUNDS
    assert result.reply.content == "I looked everywhere: nothing is stored yet."
    assert result.reply.tool_calls == []
    assert result.failure is None


def test_a_model_that_still_calls_tools_without_any_gets_a_notice_not_a_silent_reply(
    session, fake_openai
):
    for number in range(MAX_TOOL_ROUNDS + 1):
        fake_openai.reply_tool_calls(
            [("important_info", {"operation": "read", "key": f"k{number}"})]
        )

    result = do_send_message(session=session, content="Loop forever")

    assert len(fake_openai.requests) == MAX_TOOL_ROUNDS + 1
    assert len(result.activity) == 2 * MAX_TOOL_ROUNDS
    assert result.reply.content == NO_ANSWER_NOTICE
    assert result.failure is None


def test_a_second_turn_of_a_busy_session_is_refused_and_stores_nothing(session, fake_openai):
    with session_lock(session.pk):
        with pytest.raises(TurnBusy, match="a reply is still being generated"):
            do_send_message(session=session, content="Hello?")
        with pytest.raises(TurnBusy):
            do_new_topic(session=session)
    assert roles(session) == []
    assert fake_openai.requests == []


@pytest.mark.django_db(transaction=True)
def test_a_message_sent_as_the_previous_turn_ends_waits_for_it_and_is_answered(
    session, fake_openai, settings
):
    """The page can send the moment a reply appears, before ``turn.done``: the message
    waits for the finishing turn instead of being refused."""
    settings.TURN_BUSY_WAIT_SECONDS = 5.0
    previous = leases.acquire(leases.turn_lease_name(session.pk))
    threading.Timer(0.5, leases.release, args=[previous]).start()

    result = do_send_message(session=session, content="Next question")

    assert result.failure is None
    assert roles(session) == ["user", "assistant"]


def test_the_session_is_free_again_after_a_turn_even_a_failed_one(session, fake_openai):
    fake_openai.fail(503)
    do_send_message(session=session, content="One")
    do_send_message(session=session, content="Two")
    assert roles(session) == ["user", "error", "user", "assistant"]


def test_an_unexpected_error_is_recorded_without_its_details(session, monkeypatch, events):
    def broken(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(turn_module, "assemble_context", broken)

    result = do_send_message(session=session, content="Hi")

    assert result.failure == "internal"
    assert roles(session) == ["user", "error"]
    assert "secret" not in result.error.content
    assert any(e["type"] == "turn.error" for e in events)


def test_every_stored_message_is_reported_to_the_pipeline_with_its_count(
    session, fake_openai, monkeypatch
):
    noted: list[tuple[int, int]] = []
    monkeypatch.setattr(
        turn_module,
        "note_message_stored",
        lambda *, session, message: noted.append((message.seq, session.conversation_count)),
    )
    fake_openai.reply_tool_calls(
        [
            ("notes", {"operation": "$set", "content": "a"}),
            ("notes", {"operation": "$set", "content": "b"}),
        ]
    )
    fake_openai.reply_text("Done.")

    do_send_message(session=session, content="Take two notes")

    # (sequence number, conversation messages so far): the call and its results do not count
    assert noted == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2)]


def test_offline_remember_stores_the_fact_through_the_builtin_tool(session, alice, agent):
    result = do_send_message(session=session, content="/remember tea = green")

    assert read_facts(user=alice, agent=agent) == {"tea": "green"}
    call_message, tool_message = result.activity
    assert call_message.tool_calls[0]["function"]["name"] == "important_info"
    assert json.loads(call_message.tool_calls[0]["function"]["arguments"]) == {
        "operation": "$set",
        "key": "tea",
        "value": "green",
    }
    assert json.loads(tool_message.content)["value"] == "green"
    assert result.reply.content == "Remembered: tea = green"
    assert result.reply.model_name == ""  # the user's command: no model was asked


def test_offline_plain_message_says_no_model_is_configured(session):
    result = do_send_message(session=session, content="Hello")
    assert "no language model is configured" in result.reply.content
    assert roles(session) == ["user", "assistant"]


def test_the_agents_own_model_and_temperature_go_to_the_server_on_every_round(
    session, agent, fake_openai
):
    agent.model_name = "qwen2.5:14b"
    agent.temperature = 0.2
    agent.save(update_fields=["model_name", "temperature"])
    fake_openai.reply_tool_calls([("important_info", {"operation": "read"})])
    fake_openai.reply_text("Nothing yet.")

    result = do_send_message(session=Session.objects.get(pk=session.pk), content="Hi")

    assert [r["model"] for r in fake_openai.requests] == ["qwen2.5:14b", "qwen2.5:14b"]
    assert [r["temperature"] for r in fake_openai.requests] == [0.2, 0.2]
    assert result.reply.model_name == "qwen2.5:14b"


def test_an_agent_without_model_settings_uses_the_configured_model_and_no_temperature(
    session, fake_openai
):
    do_send_message(session=Session.objects.get(pk=session.pk), content="Hi")

    (request,) = fake_openai.requests
    assert request["model"] == "gpt-4o-mini"
    assert "temperature" not in request


def test_turn_done_is_announced_only_once_the_session_is_free_again(
    session, fake_openai, monkeypatch, published
):
    free_when_done: list[bool] = []

    def publish(session_id, event, *, hold=False):
        published.check(event, record=False)
        if event["type"] == "turn.done":
            free_when_done.append(not Lease.objects.filter(name=f"turn:{session_id}").exists())

    monkeypatch.setattr(turn_module, "publish", publish)
    monkeypatch.setattr(turn_module, "publish_on_commit", publish)
    fake_openai.fail(503)
    fake_openai.reply_text("Back again.")

    do_send_message(session=session, content="One")
    do_retry_turn(session=session)

    assert free_when_done == [True, True]


@pytest.fixture
def pooled_connection(transactional_db):
    """This thread's database connection, borrowed from a pool as in production (the test
    settings use none: idle pooled connections would keep the test database alive)."""
    wrapper = connections["default"]
    if wrapper.vendor != "postgresql":
        pytest.skip("the pool is PostgreSQL's")
    wrapper.close()
    options = wrapper.settings_dict.setdefault("OPTIONS", {})
    options["pool"] = {"min_size": 1, "max_size": 2}
    try:
        yield wrapper
    finally:
        wrapper.close()
        wrapper.close_pool()
        options.pop("pool")


def test_a_turn_holds_no_database_connection_while_the_model_answers(
    pooled_connection, session, fake_openai
):
    holding = []  # asked in the fake model's thread, of the turn's thread's connection
    fake_openai.on_request = lambda body: holding.append(pooled_connection.connection is not None)
    fake_openai.reply_text("Here you go.")

    result = do_send_message(session=session, content="Hello")

    assert result.reply.content == "Here you go."
    assert holding == [False]
