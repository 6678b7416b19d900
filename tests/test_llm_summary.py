"""Summaries and drift calls against what real models do (issue 21): an input longer than
the model's context, a reasoning block in the answer, a summary that runs long. The real
`openai` client against the fake server."""

from __future__ import annotations

import pytest

from memory.actions.summarize import do_summarize_topic, request_tokens
from memory.drift.detectors import Turn
from memory.drift.llm import LLMDriftDetector, Subject
from memory.lib.limits import MAX_SUMMARY_CHARS, MAX_TITLE_CHARS
from memory.lib.tokens import estimate_tokens
from memory.llm import context_input_tokens, get_chat_model
from tests.evaluation_helpers import say, summary_answer
from tests.fake_openai import FakeOpenAI


@pytest.fixture
def topic(session):
    return session.active_topic()


def _long_topic(session, messages: int = 40) -> None:
    """About 10,000 tokens of conversation (each message ~250)."""
    for number in range(messages):
        role = "user" if number % 2 == 0 else "assistant"
        say(session, role, f"message {number}: " + "Kyoto temples and gardens in April. " * 27)


# --- 4. an input longer than the model's context ------------------------------------------


def test_an_over_long_summary_input_is_cut_to_the_model_context(
    fake_openai: FakeOpenAI, session, topic, settings
):
    settings.SUMMARY_INPUT_TOKEN_BUDGET = 16000  # the budget alone would send it all
    settings.DRIFTLESS_MODEL_CONTEXT = 4096
    _long_topic(session)
    fake_openai.reply_json(summary_answer())

    do_summarize_topic(topic_id=topic.pk)

    (request,) = fake_openai.requests
    assert request_tokens(request["messages"]) <= context_input_tokens() == 3072
    sent = request["messages"][1]["content"]
    assert "earlier messages left out to fit the summary budget" in sent
    assert "message 39:" in sent  # the newest are kept
    assert "message 0:" in sent  # and the first user message, which names the subject


def test_a_context_that_fits_sends_the_whole_topic(
    fake_openai: FakeOpenAI, session, topic, settings
):
    settings.SUMMARY_INPUT_TOKEN_BUDGET = 16000
    settings.DRIFTLESS_MODEL_CONTEXT = 65536
    _long_topic(session)
    fake_openai.reply_json(summary_answer())

    do_summarize_topic(topic_id=topic.pk)

    sent = fake_openai.requests[0]["messages"][1]["content"]
    assert "left out" not in sent
    assert all(f"message {number}:" in sent for number in range(40))


def test_a_drift_call_drops_the_oldest_turns_before_its_window_to_fit_the_context(
    fake_openai: FakeOpenAI, settings
):
    settings.DRIFTLESS_MODEL_CONTEXT = 2048  # room for about 1,536 tokens
    turns = [
        Turn("user" if n % 2 == 0 else "assistant", f"turn {n}: " + "gardens and temples " * 29)
        for n in range(20)
    ]
    fake_openai.reply_json({"drifted": False, "start": None})

    LLMDriftDetector(get_chat_model("summary")).detect(turns, scan_back=5, subject=Subject())

    messages = fake_openai.requests[0]["messages"]
    assert sum(estimate_tokens(m["content"]) for m in messages) <= context_input_tokens()
    shown = messages[1]["content"]
    assert "[19] assistant: turn 19:" in shown and "[15] assistant: turn 15:" in shown  # the window
    assert "[5] assistant: turn 5:" not in shown  # the oldest context went first


# --- 8 and 9. what the model writes meets the limits, and no reasoning survives ----------


def test_a_think_block_never_reaches_the_title_or_the_summary(
    fake_openai: FakeOpenAI, session, topic
):
    say(session, "user", "We fly to Kyoto on 3 April and stay at Hiiragiya.")
    say(session, "assistant", "Noted: Kyoto from 3 April, Hiiragiya.")
    fake_openai.reply_raw_content(
        '<think>A title... maybe {"title": "Wrong"}.</think>\n```json\n'
        '{"title": "<think>short!</think>Kyoto trip", '
        '"summary": "<thinking>terse</thinking> Kyoto from 3 April; Hiiragiya.", '
        '"include_in_memory": false}\n```'
    )

    do_summarize_topic(topic_id=topic.pk)

    topic.refresh_from_db()
    assert topic.title == "Kyoto trip"
    assert topic.summary == "Kyoto from 3 April; Hiiragiya."
    assert not topic.summary_is_fallback


def test_a_title_and_a_summary_that_run_long_are_clipped_to_the_limits(
    fake_openai: FakeOpenAI, session, topic
):
    say(session, "user", "Plan the Kyoto trip.")
    say(session, "assistant", "Sure.")
    sentence = "The trip to Kyoto covers temples, gardens and food markets. "
    fake_openai.honours_max_tokens = False  # the summary call's bound is not kept
    fake_openai.reply_json(
        summary_answer(title="Kyoto trip planning " * 30, summary=sentence * 400, keep=False)
    )

    do_summarize_topic(topic_id=topic.pk)

    topic.refresh_from_db()
    assert len(topic.title) <= MAX_TITLE_CHARS and topic.title.startswith("Kyoto trip planning")
    assert len(topic.summary) <= MAX_SUMMARY_CHARS
    assert topic.summary.endswith("markets.…")  # cut after a sentence, and marked


def test_a_summary_that_is_only_reasoning_is_no_summary(fake_openai: FakeOpenAI, session, topic):
    say(session, "user", "We fly to Kyoto on 3 April.")
    fake_openai.reply_json(summary_answer(title="Kyoto", summary="<think>I am not sure"))

    do_summarize_topic(topic_id=topic.pk)

    topic.refresh_from_db()
    assert topic.summary_is_fallback  # the first-message fallback, not the reasoning
    assert "think" not in topic.summary
