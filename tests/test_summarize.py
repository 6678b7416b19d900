"""Just-in-time summarization through the real client and the fake OpenAI server."""

import pytest
from django.core.cache import cache

from memory.actions.curation import do_user_curation
from memory.actions.digest import fallback_title
from memory.actions.summarize import (
    SUMMARY_MAX_TOKENS,
    SUMMARY_PROMPT,
    SUMMARY_SCHEMA,
    do_summarize_topic,
)
from memory.models import MemoryDecision, MemoryState, Notes
from memory.stores.persistent import memory_cache_key
from tests.evaluation_helpers import SUBJECT_A, converse, say, summary_answer

# Copied by hand from spec/memory-architecture.txt, so a drift of the constant fails here.
SPEC_PROMPT = """Summarize this conversation. Return a JSON object with:
- 'title' (short descriptive label)
- 'summary' (concise note — roughly half the length of a verbose
  paragraph; keep all durable decisions, preferences, and key context,
  but cut filler; lead with the topic, use terse phrasing and
  parenthetical lists where natural; it should read like a sharp note a
  smart person left for themselves — same voice, zero bloat)
- 'include_in_memory' (boolean: true if this conversation contains durable
  decisions, preferences, or context the agent should remember across
  sessions; false if it's casual or ephemeral)"""


@pytest.fixture
def topic(session):
    return session.active_topic()


def summarize(topic):
    return do_summarize_topic(topic_id=topic.pk)


def test_it_sends_the_spec_prompt_verbatim_with_the_full_history_and_notes(
    fake_openai, session, topic
):
    say(session, "user", "Remember that we deploy on Fridays only.")
    say(
        session,
        "assistant",
        "",
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "notes", "arguments": '{"operation": "read"}'},
            }
        ],
    )
    say(session, "tool", "no notes yet", tool_call_id="call_1", tool_name="notes")
    say(session, "assistant", "Noted: Friday deploys.")
    say(session, "error", "provider timed out")
    Notes.objects.create(topic=topic, content="Decision: deploy window is Friday 10:00.")
    fake_openai.reply_json(summary_answer())

    summarize(topic)

    (request,) = fake_openai.requests
    assert SUMMARY_PROMPT == SPEC_PROMPT
    assert request["messages"][0] == {"role": "system", "content": SPEC_PROMPT}
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "topic_summary", "schema": SUMMARY_SCHEMA, "strict": True},
    }
    sent = request["messages"][1]["content"]
    for part in (
        "User: Remember that we deploy on Fridays only.",
        'Assistant called notes({"operation": "read"})',
        "Tool result (notes): no notes yet",
        "Assistant: Noted: Friday deploys.",
        "Decision: deploy window is Friday 10:00.",
    ):
        assert part in sent
    assert "provider timed out" not in sent  # error records never reach a model


@pytest.mark.parametrize(
    ("flag", "promoted"),
    [
        pytest.param(True, True, id="true"),
        pytest.param(False, False, id="false"),
        pytest.param(..., False, id="missing"),
        pytest.param("true", False, id="string-true"),
        pytest.param(1, False, id="one"),
    ],
)
def test_only_a_strict_boolean_true_promotes(fake_openai, session, topic, flag, promoted):
    converse(session, SUBJECT_A)
    answer = summary_answer(title="Balcony garden", summary="Balcony veg plan.")
    if flag is ...:
        del answer["include_in_memory"]
    else:
        answer["include_in_memory"] = flag
    fake_openai.reply_json(answer)

    topic = summarize(topic)

    assert (topic.title, topic.summary) == ("Balcony garden", "Balcony veg plan.")
    assert topic.keep_in_memory is promoted
    assert topic.summarized_at is not None


FIRST_USER = (
    "Can you help me pick a database for the billing ledger we are building this quarter,"
    " given that we need strong consistency?"
)


def script_failure(fake_openai, settings, failure):
    if failure == "garbage-json":
        fake_openai.reply_raw_content("{'title': 'not json'")
    elif failure == "not-an-object":
        fake_openai.reply_json(["Billing", "ledger"])
    elif failure == "blank-title":
        fake_openai.reply_json({"title": "  ", "summary": "x", "include_in_memory": True})
    elif failure == "missing-summary":
        fake_openai.reply_json({"title": "Ledger", "include_in_memory": True})
    elif failure == "http-500":
        fake_openai.fail(500)
    elif failure == "timeout":
        settings.LLM_TIMEOUT_SECONDS = 1.0
        fake_openai.hang(3)
    elif failure == "never-ends":  # a small model that never closes the summary's string
        fake_openai.reply_json(summary_answer(summary="Ledger: " + "ok " * 1600, keep=True))


@pytest.mark.parametrize(
    "failure",
    [
        "garbage-json",
        "not-an-object",
        "blank-title",
        "missing-summary",
        "http-500",
        "timeout",
        "never-ends",
    ],
)
def test_a_failed_summary_falls_back_to_the_first_user_message_and_never_promotes(
    fake_openai, settings, session, topic, failure
):
    say(session, "assistant", "Hello! What are we working on?")
    say(session, "user", FIRST_USER)
    converse(session, SUBJECT_A)  # plenty of messages: only the fallback keeps it out
    script_failure(fake_openai, settings, failure)

    topic = summarize(topic)

    assert topic.title == "Can you help me pick a database for the billing ledger we…"
    assert len(topic.title) <= 60
    assert topic.summary == FIRST_USER
    assert topic.keep_in_memory is False
    assert not MemoryDecision.objects.exists()
    assert all(request.get("max_tokens") == SUMMARY_MAX_TOKENS for request in fake_openai.requests)


def test_the_offline_model_gives_the_gist_and_never_promotes(session, topic):
    converse(session, SUBJECT_A)
    topic = summarize(topic)
    # memory/llm/gist.py: the user's salient sentence, whole; the salient words follow.
    assert topic.title == "I want to plan a vegetable garden on my balcony this spring"
    assert "basil" in topic.summary and not topic.summary_is_fallback
    assert topic.keep_in_memory is False


@pytest.mark.parametrize(("count", "promoted"), [(4, False), (5, True)])
def test_fewer_than_five_user_and_assistant_messages_are_never_promoted(
    fake_openai, session, topic, count, promoted
):
    converse(session, SUBJECT_A[:count])
    # A built-in's write acknowledgement: an outside tool's result (or what recall or a
    # notes read brings back) would keep the topic out of memory anyway.
    ack = '{"ok": true, "topic_id": 1, "notes": "tool results do not count"}'
    say(session, "tool", ack, tool_call_id="call_9", tool_name="notes")
    fake_openai.reply_json(summary_answer(keep=True))

    assert summarize(topic).keep_in_memory is promoted


def test_the_users_manual_promotion_survives_a_summary_that_says_false(
    fake_openai, session, topic, alice
):
    converse(session, SUBJECT_A)
    do_user_curation(topic=topic, state=MemoryState.PROMOTED, user=alice)
    fake_openai.reply_json(summary_answer(keep=False))

    topic = summarize(topic)

    assert topic.keep_in_memory is True and topic.keep_in_memory_manually_set
    assert topic.title == "Balcony garden"  # the text is still refreshed
    assert not MemoryDecision.objects.filter(actor="summarizer").exists()


def test_the_users_manual_gray_survives_a_summary_that_says_true(
    fake_openai, session, topic, alice
):
    converse(session, SUBJECT_A)
    do_user_curation(topic=topic, state=MemoryState.PROMOTED, user=alice)
    do_user_curation(topic=topic, state=MemoryState.DEPRECATED, user=alice)
    do_user_curation(topic=topic, state=MemoryState.NONE, user=alice)
    fake_openai.reply_json(summary_answer(keep=True))

    assert summarize(topic).keep_in_memory is False


def test_a_promotion_invalidates_the_scope_cache_and_is_audited(fake_openai, session, topic):
    converse(session, SUBJECT_A)
    key = memory_cache_key(session.memory_scope_key)
    cache.set(key, "stale block")
    fake_openai.reply_json(summary_answer(keep=True))

    summarize(topic)

    assert cache.get(key) is None
    decision = MemoryDecision.objects.get()
    assert (decision.actor, decision.from_state, decision.to_state) == (
        "summarizer",
        "none",
        "promoted",
    )
    assert decision.topic_title == "Balcony garden"


def test_a_demotion_invalidates_the_scope_cache(fake_openai, session, topic):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(keep=True))
    summarize(topic)
    key = memory_cache_key(session.memory_scope_key)
    cache.set(key, "stale block")
    say(session, "user", "Actually, forget the balcony plan.")
    fake_openai.reply_json(summary_answer(keep=False))

    summarize(topic)

    assert cache.get(key) is None
    assert list(MemoryDecision.objects.values_list("to_state", flat=True)) == ["none", "promoted"]


def test_a_new_summary_of_a_promoted_topic_invalidates_the_cache(fake_openai, session, topic):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(summary="First version.", keep=True))
    summarize(topic)
    key = memory_cache_key(session.memory_scope_key)
    cache.set(key, "stale block")
    say(session, "user", "Add marigolds against aphids.")
    fake_openai.reply_json(summary_answer(summary="Second version.", keep=True))

    summarize(topic)

    assert cache.get(key) is None
    assert MemoryDecision.objects.count() == 1  # the flag did not change again


def test_a_summary_outside_memory_leaves_the_cache_alone(fake_openai, session, topic):
    converse(session, SUBJECT_A)
    key = memory_cache_key(session.memory_scope_key)
    cache.set(key, "block of other topics")
    fake_openai.reply_json(summary_answer(keep=False))

    summarize(topic)

    assert cache.get(key) == "block of other topics"


@pytest.mark.parametrize(
    ("message", "title"),
    [
        ("Which **indexes** should `messages` have?", "Which indexes should messages have?"),
        ("## Plan the *Lisbon* trip\nwith details", "Plan the Lisbon trip"),
        ("- buy milk", "buy milk"),
    ],
)
def test_the_fallback_title_drops_markdown_markup(message, title):
    assert fallback_title(message) == title
