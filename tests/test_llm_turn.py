"""A turn survives what real models do (issue 21): a stalled stream, a repeated tool call,
an invented tool, a server error on a request with tools, a reasoning block. Through the
real `openai` client and the fake server, scripted to misbehave that way."""

from __future__ import annotations

import json

import pytest

from memory.actions import turn as turn_module
from memory.actions.tools import REPEATED_CALL_NOTE, UNKNOWN_TOOL_NOTE
from memory.actions.turn import do_send_message
from memory.stores.notes import read_notes
from tests.event_shapes import checked_recorder


@pytest.fixture
def events(monkeypatch, published):
    seen: list[dict] = []
    monkeypatch.setattr(turn_module, "publish", checked_recorder(published, seen))
    monkeypatch.setattr(turn_module, "publish_on_commit", checked_recorder(published, seen))
    return seen


def roles(session) -> list[str]:
    return list(session.messages.order_by("seq").values_list("role", flat=True))


def streamed(events) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "reply.delta")


# --- 3. a stalled stream ------------------------------------------------------------------


def test_a_stream_that_stalls_ends_the_turn_with_a_clear_error_record_and_keeps_the_message(
    session, fake_openai, settings, events
):
    settings.LLM_IDLE_TIMEOUT_SECONDS = 0.3
    fake_openai.stall_mid_stream(content="Kyoto in April is lovely because", after=3, seconds=5)

    result = do_send_message(session=session, content="Tell me about Kyoto in April.")

    assert roles(session) == ["user", "error"]
    assert result.user_message.content == "Tell me about Kyoto in April."
    assert result.failure == "model" and result.reply is None
    assert "model stream stalled (nothing arrived for 0.3s" in result.error.content
    (error,) = [e for e in events if e["type"] == "turn.error"]
    assert "stalled" in error["error"] and error["retryable"] is True


def test_a_slow_first_token_still_answers_the_turn(session, fake_openai, settings):
    settings.LLM_TIMEOUT_SECONDS = 2.0
    settings.LLM_IDLE_TIMEOUT_SECONDS = 0.3
    fake_openai.reply_text("Cherry blossoms peak in early April.", delay=0.8)

    result = do_send_message(session=session, content="When do cherry blossoms peak?")

    assert result.failure is None
    assert result.reply.content == "Cherry blossoms peak in early April."


# --- 5. a repeated identical tool call ----------------------------------------------------


def test_a_repeated_identical_tool_call_is_answered_from_its_result_and_ends_the_round(
    session, fake_openai
):
    note = {"operation": "$set", "content": "Hotel: Hiiragiya, 3-7 April"}
    fake_openai.reply_tool_calls([("notes", note)])
    # The same call again, its arguments spelt differently: still a repeat.
    fake_openai.reply_tool_calls(
        [("notes", '{"content": "Hotel: Hiiragiya, 3-7 April",  "operation": "$set"}')]
    )
    fake_openai.reply_text("Noted: Hiiragiya from the 3rd to the 7th of April.")

    result = do_send_message(session=session, content="We booked Hiiragiya, 3-7 April.")

    # The note was written once, not twice.
    assert read_notes(topic_id=session.active_topic().pk).count("Hiiragiya") == 1
    first, second, final = fake_openai.requests
    assert "tools" in first and "tools" in second
    assert "tools" not in final  # the model is asked to answer now
    repeat = json.loads(result.activity[3].content)
    assert repeat["note"] == REPEATED_CALL_NOTE
    assert repeat["ok"] is True and "Hiiragiya" in repeat["notes"]
    assert final["messages"][-1] == {
        "role": "tool",
        "tool_call_id": result.activity[2].tool_calls[0]["id"],
        "content": result.activity[3].content,
    }
    assert result.reply.content == "Noted: Hiiragiya from the 3rd to the 7th of April."
    assert result.failure is None


def test_a_read_after_a_write_runs_again_but_a_repeated_write_does_not(session, fake_openai):
    # What the real model did: $set, read, update, read, update of the same text.
    text = "Hotel: Hiiragiya"
    for arguments in (
        {"operation": "$set", "content": text},
        {"operation": "read"},
        {"operation": "update", "content": text + ", 3-7 April"},
        {"operation": "read"},
        {"operation": "update", "content": text + ", 3-7 April"},
    ):
        fake_openai.reply_tool_calls([("notes", arguments)])
    fake_openai.reply_text("Noted.")

    result = do_send_message(session=session, content="We booked Hiiragiya, 3-7 April.")

    results = [json.loads(m.content) for m in result.activity if m.role == "tool"]
    assert [r.get("note") == REPEATED_CALL_NOTE for r in results] == [
        False,
        False,
        False,
        False,  # the second read ran again: the update made the first one stale
        True,  # the update repeated was not run twice
    ]
    assert results[3]["notes"].endswith("3-7 April")
    assert "tools" not in fake_openai.requests[-1]
    assert result.reply.content == "Noted."


def test_different_calls_to_the_same_tool_are_not_repeats(session, fake_openai):
    fake_openai.reply_tool_calls([("important_info", {"operation": "read", "key": "hotel"})])
    fake_openai.reply_tool_calls([("important_info", {"operation": "read", "key": "dates"})])
    fake_openai.reply_text("Nothing stored about either.")

    do_send_message(session=session, content="What hotel and dates?")

    assert all("tools" in request for request in fake_openai.requests)


# --- 6. an invented tool ------------------------------------------------------------------


def test_an_invented_tool_is_an_error_result_the_model_reads_and_the_turn_answers(
    session, fake_openai
):
    (call_id,) = fake_openai.reply_tool_calls([("multiply", {"a": 17, "b": 3})])
    fake_openai.reply_text("17 × 3 = 51.")

    result = do_send_message(session=session, content="What is 17×3?")

    assert roles(session) == ["user", "assistant", "tool", "assistant"]
    tool_message = result.activity[1]
    assert json.loads(tool_message.content) == {
        "error": "unknown tool 'multiply'",
        "note": UNKNOWN_TOOL_NOTE,
    }
    assert "notes, important_info, manage_topic_memory, recall" in UNKNOWN_TOOL_NOTE
    assert fake_openai.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": tool_message.content,
    }
    assert result.reply.content == "17 × 3 = 51."
    assert result.failure is None


def test_a_malformed_tool_call_is_an_error_result_not_a_failed_turn(session, fake_openai):
    fake_openai.reply_tool_calls([("notes", '{"operation": "$set", "content": ')])
    fake_openai.reply_text("Sorry, let me answer directly.")

    result = do_send_message(session=session, content="Note this.")

    assert "not valid JSON" in json.loads(result.activity[1].content)["error"]
    assert result.failure is None and result.reply.content == "Sorry, let me answer directly."


# --- 7. a server error on a request with tools --------------------------------------------


def test_an_http_500_on_a_request_with_tools_is_asked_again_without_tools(session, fake_openai):
    fake_openai.fail(status=500, message="Failed to parse tool call")
    fake_openai.reply_text("17 × 3 is 51.")

    result = do_send_message(session=session, content="What is 17×3?")

    first, second = fake_openai.requests
    assert "tools" in first and "tools" not in second
    assert second["messages"] == first["messages"]
    assert roles(session) == ["user", "assistant"]
    assert result.reply.content == "17 × 3 is 51." and result.failure is None


def test_a_500_named_in_a_stream_error_event_is_asked_again_without_tools(session, fake_openai):
    # llama.cpp's server, once it started a stream, names its failure in an error event.
    fake_openai.fail_mid_stream(content="", after=0, mode="error", status=500)
    fake_openai.reply_text("51.")

    result = do_send_message(session=session, content="What is 17×3?")

    first, second = fake_openai.requests
    assert "tools" in first and "tools" not in second
    assert result.reply.content == "51." and result.failure is None


def test_an_error_event_after_the_answer_began_is_not_asked_again(session, fake_openai):
    fake_openai.fail_mid_stream(content="It is fifty", after=2, mode="error", status=500)

    result = do_send_message(session=session, content="What is 17×3?")

    assert len(fake_openai.requests) == 1
    assert result.failure == "model" and "model endpoint error" in result.error.content
    assert "Failed to parse" not in result.error.content  # the provider's words: the log's


def test_a_second_500_is_a_clear_error_record(session, fake_openai):
    fake_openai.fail(status=500, message="Failed to parse tool call")
    fake_openai.fail(status=500, message="still broken")

    result = do_send_message(session=session, content="What is 17×3?")

    assert len(fake_openai.requests) == 2
    assert roles(session) == ["user", "error"]
    assert result.failure == "model" and "HTTP 500" in result.error.content
    assert "still broken" not in result.error.content  # the provider's words: the log's


def test_a_500_on_a_request_without_tools_is_not_retried(session, fake_openai):
    for number in range(turn_module.MAX_TOOL_ROUNDS):
        fake_openai.reply_tool_calls(
            [("important_info", {"operation": "read", "key": f"{number}"})]
        )
    fake_openai.fail(status=500, message="boom")

    result = do_send_message(session=session, content="Look it all up.")

    assert len(fake_openai.requests) == turn_module.MAX_TOOL_ROUNDS + 1
    assert result.failure == "model"


@pytest.mark.parametrize("status", [400, 503])
def test_a_client_error_or_an_overload_on_a_request_with_tools_is_not_retried(
    session, fake_openai, status
):
    fake_openai.fail(status=status, message="no")

    result = do_send_message(session=session, content="Hello")

    assert len(fake_openai.requests) == 1 and result.failure == "model"


# --- 8. reasoning blocks ------------------------------------------------------------------


def test_a_think_block_never_reaches_the_stored_reply_or_the_clients(session, fake_openai, events):
    fake_openai.reply_text(
        "<think>The user wants the date. Kyoto trip, 3 April.</think>\n\nYou arrive on 3 April."
    )

    result = do_send_message(session=session, content="When do we arrive?")

    assert result.reply.content == "You arrive on 3 April."
    assert streamed(events) == "You arrive on 3 April."


def test_a_think_block_before_a_tool_call_is_not_stored_with_it(session, fake_openai):
    fake_openai.reply_tool_calls(
        [("important_info", {"operation": "read"})], content="<think>I should look.</think>"
    )
    fake_openai.reply_text("Nothing stored yet.")

    result = do_send_message(session=session, content="What do you know?")

    assert result.activity[0].content == ""
    assert result.reply.content == "Nothing stored yet."
