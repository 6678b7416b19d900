"""The model profile shapes the turn (issue 42): on a model that calls tools poorly a
question goes out lean (no tool schemas, no tools block), a message that asks for a
memory action gets the tools in any supported language, a capable model always gets
them; and what the user reversed is never quoted as live. Through the real turn path and
the scripted fake model, whose received requests are recorded."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from memory.actions.context import assemble_context
from memory.actions.turn import do_send_message
from memory.lib.tool_words import BUILTIN_TOOL_NAMES
from memory.llm.profiles import SMALL_MEMORY_TOKENS, profile_for
from memory.models import Message, Session, Topic
from memory.text.intent import memory_action
from tests.memory_builders import add_topic

SMALL = "qwen2.5-coder-1.5b-instruct"

REMEMBER = {
    "en": "please remember that my passport expires in May",
    "fr": "Souviens-toi que mon passeport expire en mai, s'il te plaît",
    "de": "Bitte merk dir, dass mein Reisepass im Mai abläuft",
    "es": "Recuerda que mi pasaporte caduca en mayo",
    "ru": "Запомни, что мой паспорт истекает в мае",
    "ja": "パスポートが5月に切れることを覚えておいて",
}
QUESTIONS = {
    "en": "When does my passport expire?",
    "fr": "Quelle marque est mon piano ?",
    "de": "Erinnerst du dich, wie meine Yogalehrerin heißt?",
    "es": "¿Recuerdas cuándo caduca mi pasaporte?",
    "ru": "Ты помнишь, как зовут моего учителя?",
    "ja": "私のパスポートはいつ切れますか？",
}


def tool_names(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


@pytest.fixture
def small(settings, fake_openai):
    settings.DRIFTLESS_MODEL = SMALL
    settings.DRIFTLESS_MODEL_PROFILE = "auto"
    return fake_openai


# --- the profile ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (SMALL, "small"),
        ("qwen2.5:0.5b", "small"),
        ("llama3.2:3b", "small"),
        ("SmolLM2-135M-Instruct", "small"),
        ("gemma-3-270m-it", "small"),
        ("gpt-4o-mini", "capable"),
        ("gpt-4o", "capable"),
        ("claude-sonnet-4", "capable"),
        ("mistral-large", "capable"),  # a family the table does not know: as before
    ],
)
def test_each_family_has_its_default(name, kind):
    profile = profile_for(name)
    assert profile.kind == kind
    assert profile.tools_reliable is (kind == "capable")


def test_the_setting_overrides_the_family_either_way():
    assert profile_for(SMALL, "capable").tools_reliable
    assert not profile_for("gpt-4o", "small").tools_reliable
    assert profile_for("gpt-4o", "small").family == "openai (override)"
    assert profile_for(SMALL, "auto") == profile_for(SMALL)


# --- the signal -------------------------------------------------------------------------


@pytest.mark.parametrize("language", sorted(REMEMBER))
def test_a_request_to_remember_is_told_from_a_question_in_every_language(language):
    assert memory_action(REMEMBER[language]).asks
    assert not memory_action(QUESTIONS[language]).asks


def test_no_question_of_the_memory_qa_set_reads_as_a_memory_action():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "bench" / "data"
    asked = [
        question["q"]
        for name in ("memory-qa-tune.jsonl", "memory-qa-test.jsonl")
        for line in (root / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
        for question in json.loads(line)["questions"]
    ]
    assert len(asked) > 100
    assert [q for q in asked if memory_action(q).asks] == []


# --- the turn's shape --------------------------------------------------------------------


def test_a_question_turn_on_a_small_model_carries_no_tool_schemas(session, small):
    small.reply_text("In May.")

    result = do_send_message(session=session, content="When does my passport expire?")

    assert result.reply.content == "In May."
    [request] = small.requests
    assert "tools" not in request and tool_names(request) == []
    stable = request["messages"][0]["content"]
    assert "## Tools" not in stable and "recall" not in stable


@pytest.mark.parametrize("language", ["en", "fr", "de", "es", "ru", "ja"])
def test_a_message_that_asks_to_remember_carries_the_tools(session, small, language):
    small.reply_tool_calls(
        [("important_info", {"operation": "$set", "key": "passport", "value": "May"})]
    )
    small.reply_text("Noted.")

    do_send_message(session=session, content=REMEMBER[language])

    first = small.requests[0]
    assert tool_names(first)[: len(BUILTIN_TOOL_NAMES)] == list(BUILTIN_TOOL_NAMES)
    # The stable prefix is the lean turn's: both shapes share the provider's cache.
    assert "## Tools" not in first["messages"][0]["content"]


def test_both_shapes_share_one_stable_prefix(session, small):
    small.reply_text("Noted.")
    small.reply_text("In May.")
    do_send_message(session=session, content=REMEMBER["en"])
    do_send_message(session=session, content=QUESTIONS["en"])
    tooled, lean = small.requests
    assert tool_names(tooled) and not tool_names(lean)
    assert tooled["messages"][0] == lean["messages"][0]


@pytest.mark.parametrize(
    ("model", "capable", "other"), [("gpt-4o-mini", "auto", "small"), (SMALL, "capable", "auto")]
)
def test_a_capable_profile_always_carries_every_tool(
    session, fake_openai, settings, model, capable, other
):
    """Capable (by family or by the setting): every tool, on a question too; the same
    model under the other profile goes lean, so it is the profile that decides."""
    settings.DRIFTLESS_MODEL = model
    settings.DRIFTLESS_MODEL_PROFILE = capable
    fake_openai.reply_text("In May.")
    fake_openai.reply_text("In May.")

    do_send_message(session=session, content="When does my passport expire?")
    settings.DRIFTLESS_MODEL_PROFILE = other
    do_send_message(session=session, content="When does my passport expire?")

    full, lean = fake_openai.requests
    assert tool_names(full)[: len(BUILTIN_TOOL_NAMES)] == list(BUILTIN_TOOL_NAMES)
    assert "## Tools" in full["messages"][0]["content"]
    assert tool_names(lean) == []


def test_the_remember_command_works_on_a_lean_model_without_asking_it(session, small):
    result = do_send_message(session=session, content="/remember passport = May 2027")

    assert small.requests == []  # the model was never asked
    assert "passport" in result.reply.content


def test_the_agents_own_model_chooses_its_profile(session, fake_openai, settings):
    settings.DRIFTLESS_MODEL = "gpt-4o-mini"
    session.agent.model_name = SMALL
    session.agent.save(update_fields=["model_name"])
    fake_openai.reply_text("In May.")

    do_send_message(session=session, content="When does my passport expire?")

    assert tool_names(fake_openai.requests[0]) == []


# --- what the inspector shows -----------------------------------------------------------


def test_the_context_inspector_shows_the_profile_and_the_turns_shape(session, alice, small):
    client = APIClient()
    client.force_authenticate(alice)

    data = client.get(f"/agents-api/sessions/{session.pk}/context").json()

    assert data["profile"]["kind"] == "small" and data["profile"]["model"] == SMALL
    assert data["profile"]["tools_reliable"] is False
    assert data["shape"]["lean"] is True and data["tools"] == []


def test_a_stranger_never_sees_the_profile_of_someone_elses_session(session, bob, small):
    client = APIClient()
    client.force_authenticate(bob)
    assert client.get(f"/agents-api/sessions/{session.pk}/context").status_code == 404


# --- what the user reversed ---------------------------------------------------------------


def test_a_deprecated_topic_is_never_quoted_as_live_in_recall_or_the_memory_block(
    session, alice, agent, small
):
    earlier = Session.objects.start(user=alice, agent=agent)
    reversed_ = Topic.objects.create(
        session=earlier,
        title="Wedding venue",
        summary="The wedding is at St Aldhelm's church, booked for June.",
        is_active=False,
        deprecated=True,
        origin=Topic.Origin.USER,
    )
    earlier.append_message(
        topic=reversed_,
        role=Message.Role.USER,
        content="We booked St Aldhelm's church for the wedding.",
    )
    earlier.append_message(
        topic=reversed_, role=Message.Role.ASSISTANT, content="Lovely, St Aldhelm's church it is."
    )
    live = Topic.objects.create(
        session=earlier, title="Wedding venue, again", is_active=False, origin=Topic.Origin.USER
    )
    earlier.append_message(
        topic=live, role=Message.Role.USER, content="The wedding moved to the barn at Hollow Farm."
    )
    small.reply_text("At the barn.")

    do_send_message(session=session, content="Where is the wedding?")

    sent = json.dumps(small.requests[0]["messages"], ensure_ascii=False)
    assert "Hollow Farm" in sent  # recall works: the live topic is quoted
    assert "St Aldhelm" not in sent  # the reversed one never is, in any block
    stack = assemble_context(session=session)
    assert f"[#{reversed_.pk}] [DEPRECATED] Wedding venue" in stack.messages[0]["content"]


# --- the memory block a small model is given ------------------------------------------------


def test_a_small_model_gets_the_newest_memory_within_its_budget_as_the_panels_show(
    session, alice, agent, small, settings
):
    earlier = Session.objects.start(user=alice, agent=agent)
    topics = [
        add_topic(
            earlier,
            title=f"Decision {i}",
            summary=f"Decision {i}, with its reasons: " + "details " * 50,
            keep=True,
            age_days=30 - i,
            messages=2,
        )
        for i in range(8)
    ]  # about 110 tokens each: the agent's 1,500 holds all, a small model's budget a few
    small.reply_text("Noted.")

    do_send_message(session=session, content="What did we decide?")

    block = small.requests[0]["messages"][0]["content"]
    given = [topic for topic in topics if f"[#{topic.pk}] Decision" in block]
    assert 1 <= len(given) < len(topics)
    assert given == topics[-len(given) :]  # the newest
    client = APIClient()
    client.force_authenticate(alice)
    panel = client.get(f"/agents-api/sessions/{session.pk}/memory").json()
    assert panel_ids(panel) == [topic.pk for topic in given]
    assert panel["budget"] == SMALL_MEMORY_TOKENS and panel["used"] <= SMALL_MEMORY_TOKENS
    assert len(panel["scope"]["entries"]) == len(topics)  # the scope keeps them all
    inspected = client.get(f"/agents-api/sessions/{session.pk}/context").json()
    assert [link["topic_id"] for link in inspected["memory_sources"]["kept"]] == panel_ids(panel)

    settings.DRIFTLESS_MODEL_PROFILE = "capable"
    stable = assemble_context(session=session).messages[0]["content"]
    assert all(f"[#{topic.pk}] Decision" in stable for topic in topics)


def panel_ids(panel: dict) -> list[int]:
    return [entry["topic_id"] for entry in panel["entries"]]
