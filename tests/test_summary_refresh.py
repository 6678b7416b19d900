"""Refreshes that keep what is there and cost what is new (issue 10 part B, issue 12).

A failed refresh never erases a real summary; a refresh sends the previous summary plus
the messages since, under ``SUMMARY_INPUT_TOKEN_BUDGET``, in one call with the spec's
prompt. Every figure is read from the requests the fake provider received.
"""

import json

import pytest
from django.utils import timezone

from memory.actions.evaluation import evaluate_session
from memory.actions.summarize import SUMMARY_PROMPT, do_summarize_topic
from memory.drift.detectors import DriftVerdict
from memory.lib.tokens import estimate_tokens
from memory.models import Message, Session, Topic
from memory.stores.persistent import get_persistent_memory
from tests.evaluation_helpers import SUBJECT_A, FixedDetector, converse, say, summary_answer

NO_DRIFT = FixedDetector(DriftVerdict(False, None, "same subject"))


def refresh(session):
    outcome = evaluate_session(session_id=session.pk, reason="test", detector=NO_DRIFT)
    assert outcome.action == "refreshed", outcome
    return Topic.objects.get(pk=outcome.topic_id)


def sent_text(request) -> str:
    system, user = request["messages"]
    assert system == {"role": "system", "content": SUMMARY_PROMPT}  # still the spec's prompt
    return user["content"]


def sent_tokens(request) -> int:
    """Independent of the summarizer's own count: four characters a token, per message."""
    return sum(-(-len(message["content"]) // 4) + 4 for message in request["messages"])


# --- a failed refresh keeps what is there -------------------------------------------------


@pytest.mark.parametrize("failure", ["http-500", "garbage"])
def test_a_good_summary_survives_a_failed_refresh(fake_openai, session, agent, alice, failure):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Balcony garden", summary="Good summary"))
    refresh(session)
    converse(session, [("user", "Should I add marigolds?"), ("assistant", "Yes, by the basil.")])
    if failure == "http-500":
        fake_openai.fail(500)
    else:
        fake_openai.reply_raw_content("{'title': 'not json'")

    topic = refresh(session)

    assert len(fake_openai.requests) == 2
    assert (topic.title, topic.summary, topic.keep_in_memory) == (
        "Balcony garden",
        "Good summary",
        True,
    )
    assert topic.summary_is_fallback is False
    assert topic.summarized_through_seq == 6  # the failed call covered nothing
    other = Session.objects.start(user=alice, agent=agent)
    assert get_persistent_memory(session=other).entries[0].line == (
        f"{timezone.localdate().isoformat()} [#{topic.pk}] Balcony garden: Good summary"
    )

    # The next refresh sends what the failed one could not.
    say(session, "user", "And chives?")
    fake_openai.reply_json(summary_answer(title="Balcony garden", summary="Better summary"))
    topic = refresh(session)
    sent = sent_text(fake_openai.requests[2])
    assert "Summary so far (title: Balcony garden):\nGood summary" in sent
    assert "User: Should I add marigolds?" in sent and "User: And chives?" in sent
    assert "How deep should the tomato pots be?" not in sent
    assert (topic.summary, topic.summarized_through_seq) == ("Better summary", 9)


def test_only_a_topic_without_a_summary_falls_back_and_the_fallback_is_recorded(
    fake_openai, session
):
    converse(session, SUBJECT_A)
    fake_openai.fail(500)

    topic = refresh(session)

    assert topic.summary_is_fallback is True
    assert topic.title == "I want to plan a vegetable garden on my balcony this spring."
    assert topic.keep_in_memory is False

    # A fallback is no starting point: the next call is a full one and clears the mark.
    say(session, "user", "Lettuce too?")
    fake_openai.reply_json(summary_answer(title="Balcony garden"))
    topic = refresh(session)
    sent = sent_text(fake_openai.requests[1])
    assert "Summary so far" not in sent
    assert "User: I want to plan a vegetable garden" in sent
    assert (topic.title, topic.summary_is_fallback) == ("Balcony garden", False)


def test_a_refresh_with_nothing_new_makes_no_call_and_keeps_the_summary(fake_openai, session):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Balcony garden", summary="Kept as written."))
    topic = do_summarize_topic(topic_id=session.active_topic().pk)

    topic = do_summarize_topic(topic_id=topic.pk)

    assert len(fake_openai.requests) == 1
    assert (topic.title, topic.summary) == ("Balcony garden", "Kept as written.")


def test_an_edited_summary_is_the_starting_point_of_the_next_refresh(fake_openai, session):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Balcony garden", summary="Model text."))
    topic = refresh(session)
    # The user's correction (curation writes it the same way: the summary text itself).
    Topic.objects.filter(pk=topic.pk).update(title="Balcony herbs", summary="User's fix.")
    say(session, "user", "Basil on the left.")
    fake_openai.reply_json(summary_answer(title="Balcony herbs", summary="User's fix, extended."))

    refresh(session)

    assert "Summary so far (title: Balcony herbs):\nUser's fix." in sent_text(
        fake_openai.requests[1]
    )


# --- bounded, incremental input -----------------------------------------------------------

LINE = "We compared {n} options for the ledger's storage layer and its replication, again. "


def long_topic(session: Session, count: int, *, start: int = 0) -> None:
    """``count`` messages with realistic lengths (about 200 characters), every tenth a tool
    round with a 5,000-character result."""
    session.refresh_from_db(fields=["message_count"])
    topic = session.active_topic()
    rows = []
    for i in range(start, start + count):
        seq = session.message_count + 1 + i - start
        if i % 10 == 8:
            call = {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "search", "arguments": "{}"},
            }
            rows.append(
                Message(session=session, topic=topic, seq=seq, role="assistant", tool_calls=[call])
            )
        elif i % 10 == 9:
            rows.append(
                Message(
                    session=session,
                    topic=topic,
                    seq=seq,
                    role="tool",
                    content=json.dumps({"rows": ["x" * 50] * 100}),
                    tool_call_id=f"c{i - 1}",
                    tool_name="search",
                )
            )
        else:
            role = "user" if i % 2 == 0 else "assistant"
            text = f"[{i}] " + (LINE.format(n=i) * 3).strip()
            rows.append(Message(session=session, topic=topic, seq=seq, role=role, content=text))
    Message.objects.bulk_create(rows)
    Session.objects.filter(pk=session.pk).update(message_count=session.message_count + count)


def test_a_2000_message_topic_refreshes_under_the_budget_then_sends_only_what_is_new(
    fake_openai, session, settings
):
    settings.SUMMARY_INPUT_TOKEN_BUDGET = 16000
    long_topic(session, 2000)
    whole = sum(
        estimate_tokens(content) for content in session.messages.values_list("content", flat=True)
    )
    assert whole > 10 * settings.SUMMARY_INPUT_TOKEN_BUDGET  # it could never be sent whole
    fake_openai.reply_json(summary_answer(title="Ledger storage", summary="Ledger: Postgres."))

    topic = refresh(session)

    (first,) = fake_openai.requests
    assert sent_tokens(first) <= settings.SUMMARY_INPUT_TOKEN_BUDGET
    sent = sent_text(first)
    assert "User: [0] We compared 0 options" in sent  # how the topic began
    assert "Assistant: [1997] We compared 1997" in sent  # and where it is now
    assert "earlier messages left out to fit the summary budget" in sent
    assert "characters cut]" in sent  # tool results are clipped, not sent whole
    assert (topic.title, topic.summarized_through_seq) == ("Ledger storage", 2000)

    long_topic(session, 10, start=2000)
    fake_openai.reply_json(summary_answer(title="Ledger storage", summary="Ledger: Postgres 17."))

    topic = refresh(session)

    second = fake_openai.requests[1]
    sent = sent_text(second)
    assert sent.startswith("Summary so far (title: Ledger storage):\nLedger: Postgres.")
    transcript = sent.split("Conversation since then:\n", 1)[1]
    assert [line.split("]")[0] for line in transcript.splitlines() if "We compared" in line] == [
        f"User: [{i}" if i % 2 == 0 else f"Assistant: [{i}" for i in range(2000, 2008)
    ]
    assert sent_tokens(second) < 1500  # what is new, not the topic
    assert topic.summarized_through_seq == 2010


@pytest.mark.parametrize("incremental", [True, False])
def test_a_topic_that_fits_is_sent_whole_only_when_incremental_summaries_are_off(
    fake_openai, session, settings, incremental
):
    settings.SUMMARY_INCREMENTAL = incremental
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Balcony garden"))
    refresh(session)
    say(session, "user", "Marigolds?")
    fake_openai.reply_json(summary_answer(title="Balcony garden"))

    refresh(session)

    sent = sent_text(fake_openai.requests[1])
    assert ("I want to plan a vegetable garden" in sent) is not incremental
    assert ("Summary so far" in sent) is incremental
    assert "User: Marigolds?" in sent


def test_a_forks_prior_topic_is_summarized_from_its_own_messages_not_a_summary_of_the_moved_ones(
    fake_openai, session
):
    from memory.actions.fork import ForkPlan, do_silent_fork

    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Garden", summary="Garden and laptop."))
    topic = refresh(session)
    converse(session, [("user", "My laptop battery drains."), ("assistant", "Check wake timers.")])
    topic.refresh_from_db()
    # Pretend the last summary already covered the laptop messages that will move away.
    Topic.objects.filter(pk=topic.pk).update(summarized_through_seq=8)
    fake_openai.reply_json(summary_answer(title="Garden", summary="Garden only."))

    do_silent_fork(plan=ForkPlan(session.pk, topic.pk, start_seq=7, reason="test"))

    sent = sent_text(fake_openai.requests[1])
    assert "Summary so far" not in sent and "laptop" not in sent
    topic.refresh_from_db()
    assert (topic.summary, topic.summarized_through_seq) == ("Garden only.", 6)
