"""Context assembly: the three layers, their order, the window and the stable prefix."""

import itertools
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.actions.context import (
    EARLIER_TOPICS_INTRO,
    RECALL_HINT,
    assemble_context,
    inspect_context,
    render_window,
    window_span,
)
from memory.actions.curation import do_agent_curation, do_user_curation
from memory.actions.tools import dispatch_tool_calls
from memory.lib.tokens import estimate_tokens
from memory.llm import ToolCall
from memory.models import MemoryState, Message, Notes, Session, Topic
from memory.stores import session_topics
from memory.stores.facts import set_fact, unset_fact
from memory.stores.notes import append_notes
from tests.conftest import make_user
from tests.memory_builders import (
    add_message,
    add_messages,
    add_tool_round,
    add_topic,
    assert_valid_openai_thread,
)


def window_of(stack):
    return [m for m in stack.messages if m["role"] != "system"]


def today() -> str:
    """The ISO day the records of topics and facts made during the test carry."""
    return timezone.localdate().isoformat()


def stable_text(session):
    return assemble_context(session=session).messages[0]["content"]


# --- the window --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "first"),
    [(20, 1), (21, 17), (36, 17), (37, 33), (52, 33), (53, 49), (400, 385), (401, 385)],
)
def test_the_window_trims_sixteen_messages_at_once_and_never_holds_more_than_twenty(
    session, count, first
):
    add_messages(session, count)
    window = window_of(assemble_context(session=session))
    assert [m["content"] for m in window] == [f"m{seq}" for seq in range(first, count + 1)]
    assert 5 <= len(window) <= 20


def test_the_window_keeps_its_first_message_while_a_long_topic_grows(session):
    """Turn after turn of a long topic (a user message, a reply, now and then a tool round),
    the window never passes 20 messages, and its first message changes only every sixteen
    stored messages: eight turns in a row past the first twenty messages, ten before."""
    firsts, sizes = [], []
    for turn in range(60):
        add_message(session, Message.Role.USER, f"question {turn}")
        window = window_of(assemble_context(session=session))  # what this turn sends
        sizes.append(len(window))
        firsts.append(window[0]["content"] or window[0]["tool_calls"][0]["id"])
        if turn % 7 == 3:
            add_tool_round(session, ["notes"], tag=f"t{turn}-")
        add_message(session, Message.Role.ASSISTANT, f"answer {turn}")
    assert max(sizes) <= 20
    runs = [len(list(group)) for _, group in itertools.groupby(firsts)]
    assert runs[0] >= 9  # the topic's first 20 messages (one tool round among them)
    assert min(runs[1:-1]) >= 7  # a trim drops sixteen messages: a tool round costs a turn
    assert len(runs) <= 10  # 138 messages: the first 20, then at most one trim per 16


def test_the_inspector_shows_the_window_policy(session):
    add_messages(session, 27)
    span = inspect_context(session=session)["window"]
    assert span["topic_messages"] == 27 and span["kept"] == 11
    assert span["max_messages"] == 20 and span["block"] == 16
    assert "the last 5 to 20 messages" in span["policy"]
    assert "the oldest 16 are dropped at once" in span["policy"]


def test_a_turn_never_counts_the_topic_past_its_window(session):
    """The turn reads the newest 21 rows and no more: past the window, the topic's
    length is the inspector's to count, not every turn's."""
    add_messages(session, 27)
    span = assemble_context(session=session).window
    assert span.kept == 11 and span.topic_messages is None


@pytest.mark.parametrize("step", [1, 2, 3])
def test_the_window_keeps_5_to_20_and_trims_at_fixed_places_when_numbers_have_gaps(step):
    """The trims are placed on sequence numbers: a topic whose numbers have gaps (error
    records, another topic's messages) still keeps between 5 and 20 messages, and its
    first message moves only at a trim, never one message a turn."""
    firsts = []
    for length in range(1, 120):
        seqs = [1 + step * i for i in reversed(range(length))][:21]  # newest first
        span = window_span(seqs, size=20, block=16)
        assert min(length, 5) <= span.kept <= 20
        firsts.append(seqs[span.kept - 1])
    moves = [i for i in range(1, len(firsts)) if firsts[i] != firsts[i - 1]]
    assert firsts == sorted(firsts)
    assert all(later - earlier >= 16 // step for earlier, later in itertools.pairwise(moves))


def test_a_short_topic_is_sent_whole_and_ends_with_the_new_user_message(session):
    add_messages(session, 5)
    add_message(session, Message.Role.USER, "the new prompt")
    window = window_of(assemble_context(session=session))
    assert len(window) == 6
    assert window[-1] == {"role": "user", "content": "the new prompt"}


def test_only_the_active_topic_is_in_the_window(session):
    earlier = add_topic(session, title="Earlier", summary="Was about lunch.")
    add_messages(session, 3, topic=earlier, prefix="old")
    add_messages(session, 2, prefix="now")
    window = window_of(assemble_context(session=session))
    assert [m["content"] for m in window] == ["now4", "now5"]


def test_error_records_are_never_sent_to_the_model(session):
    add_messages(session, 35)
    add_message(session, Message.Role.ERROR, "provider timed out")
    add_message(session, Message.Role.USER, "retry please")
    window = window_of(assemble_context(session=session))
    assert len(window) == 20  # 36 messages the model may see: the error is not one
    assert all(m["content"] != "provider timed out" for m in window)
    assert window[-1]["content"] == "retry please"


def test_a_tool_call_and_its_result_are_never_split_at_the_window_edge(session):
    add_messages(session, 15)
    add_tool_round(session, ["notes"], tag="edge")  # assistant call (16) + its result (17)
    add_messages(session, 19, prefix="after")
    # The window of 36 messages starts at the 17th, the tool result: its call fell outside.
    window = window_of(assemble_context(session=session))
    assert_valid_openai_thread(window)
    assert window[0]["role"] != "tool"
    assert [m["content"] for m in window] == [f"after{seq}" for seq in range(18, 37)]


def test_a_call_inside_the_window_keeps_all_of_its_results(session):
    add_messages(session, 16)
    add_tool_round(session, ["notes", "important_info"], tag="in")  # 17, 18 and 19
    add_messages(session, 17, prefix="after")
    window = window_of(assemble_context(session=session))
    assert_valid_openai_thread(window)
    assert window[0]["tool_calls"][0]["id"] == "call-in0"
    assert [m["tool_call_id"] for m in window[1:3]] == ["call-in0", "call-in1"]


def test_the_window_stays_valid_whatever_the_edge_position(session):
    for round_no in range(8):
        add_message(session, Message.Role.USER, f"question {round_no}")
        add_tool_round(
            session, ["notes", "important_info", "manage_topic_memory"], tag=f"r{round_no}-"
        )
        add_message(session, Message.Role.ASSISTANT, f"answer {round_no}")
    for extra in range(6):
        window = window_of(assemble_context(session=session))
        assert_valid_openai_thread(window)
        assert 0 < len(window) <= 20
        add_message(session, Message.Role.USER, f"more {extra}")


def test_calls_without_stored_results_never_make_an_invalid_request(session):
    add_message(session, Message.Role.USER, "do two things")
    add_tool_round(session, ["notes", "important_info"], answered=["notes"], tag="half")
    add_message(session, Message.Role.ASSISTANT, "", tool_calls=[_call("lost", "notes")])
    add_message(session, Message.Role.ASSISTANT, "I tried.", tool_calls=[_call("lost2", "notes")])
    window = window_of(assemble_context(session=session))
    assert_valid_openai_thread(window)
    assert window[1]["tool_calls"] == [_call("call-half0", "notes")]
    assert window[-1] == {"role": "assistant", "content": "I tried."}
    assert len(window) == 4


def test_tool_calls_are_rendered_in_the_openai_shape():
    rows = [
        {"role": "user", "content": "hi", "tool_calls": [], "tool_call_id": ""},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "function": {"name": "notes", "arguments": {"a": 1}}}],
            "tool_call_id": "",
        },
        {"role": "tool", "content": '{"ok": true}', "tool_calls": [], "tool_call_id": "c1"},
    ]
    assert render_window(rows) == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "notes", "arguments": '{"a": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
    ]


def test_a_replys_recalled_block_goes_back_before_the_message_it_answered_while_that_is_kept():
    def row(role, content, recalled="", carried=()):
        trace = {"carried": list(carried)} if carried else {}
        return {
            "role": role,
            "content": content,
            "tool_calls": [],
            "tool_call_id": "",
            "recalled": recalled,
            "memory_trace": trace,
        }

    ref = {"kind": "recalled", "topic_id": 1, "session_id": 1, "message_id": 7}
    kept = {**ref, "message_id": 8, "earlier": True}  # an earlier block's, not this one's
    rows = [
        row("assistant", "first reply", recalled="## Recalled A"),  # its question was trimmed
        row("user", "second"),
        row("assistant", "second reply", recalled="## Recalled B", carried=[ref, kept]),
        row("user", "third"),
    ]
    earlier: list[dict] = []

    assert render_window(rows, earlier=earlier) == [
        {"role": "assistant", "content": "first reply"},
        {"role": "system", "content": "## Recalled B"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "second reply"},
        {"role": "user", "content": "third"},
    ]
    assert earlier == [ref]


def _call(call_id, name):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


# --- the layers --------------------------------------------------------------------------


def test_the_stack_is_ordered_stable_semi_stable_volatile(session, agent, alice):
    topic = session.active_topic()
    lunch = add_topic(session, title="Lunch", summary="Chose the noodle place.")
    append_notes(topic=topic, text="Decided: Postgres.")
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")
    Session.objects.filter(pk=session.pk).update(drift_result="continuing: Ledger")
    add_messages(session, 2)
    stack = assemble_context(session=session, working_memory="Plan: answer briefly.")

    stable, semi, date, *thread, working = stack.messages
    assert stable["role"] == semi["role"] == date["role"] == working["role"] == "system"
    assert date["content"].startswith(f"Today's date: {today()} (")
    markers = ["You are Drift.", "## Skills", "## Tools", "## Durable facts", "## Drift detection"]
    positions = [stable["content"].index(marker) for marker in markers]
    assert positions == sorted(positions)
    assert f"- city (set {today()}): Lyon" in stable["content"]
    assert "continuing: Ledger" in stable["content"]
    assert semi["content"].index("> Decided: Postgres.") < semi["content"].index(
        f"- {today()} [#{lunch.pk}] Lunch: Chose the noodle place."
    )
    assert [m["content"] for m in thread] == ["m1", "m2"]
    assert working["content"] == "Plan: answer briefly."
    assert [layer.name for layer in stack.layers] == ["stable", "semi_stable", "volatile"]


def test_persistent_memory_sits_between_the_tools_and_the_facts(session, agent, alice):
    other = Session.objects.start(user=alice, agent=agent)
    add_topic(other, title="Stack", summary="Django + Postgres.", keep=True)
    set_fact(user=alice, agent=agent, key="tz", value="CET", actor="user")
    text = stable_text(session)
    assert (
        text.index("## Tools")
        < text.index("Stack: Django + Postgres.")
        < text.index(f"- tz (set {today()}): CET")
    )


def test_the_semi_stable_message_is_omitted_when_there_is_nothing_in_it(session):
    add_messages(session, 1)
    stack = assemble_context(session=session)
    assert [m["role"] for m in stack.messages] == ["system", "system", "user"]
    assert stack.messages[1]["content"].startswith("Today's date: ")
    assert stack.layer("semi_stable").tokens == 0


def test_archived_notes_are_not_injected(session):
    topic = session.active_topic()
    append_notes(topic=topic, text="old scratch")
    Notes.objects.filter(topic=topic).archive()
    stack = assemble_context(session=session)
    assert "old scratch" not in json.dumps(stack.messages)
    append_notes(topic=topic, text="fresh scratch")
    semi = assemble_context(session=session).messages[1]["content"]
    assert "fresh scratch" in semi and "old scratch" not in semi


def test_prior_topics_are_this_sessions_summaries_in_order_deprecated_by_title_only(session):
    first = add_topic(session, title="First", summary="One.")
    add_topic(session, title="Untold", summary="")
    reversed_ = add_topic(session, title="Reversed", summary="We picked MySQL.", deprecated=True)
    third = add_topic(session, title="Third", summary="Three.", keep=True)
    semi = assemble_context(session=session).layer("semi_stable")
    prior = next(part for part in semi.parts if part.name == "prior_topics")
    assert prior.text.splitlines()[2:] == [
        f"- {today()} [#{first.pk}] First: One.",
        f"- {today()} [#{reversed_.pk}] [DEPRECATED] Reversed",
        f"- {today()} [#{third.pk}] Third: Three.",
    ]
    assert "MySQL" not in prior.text


def test_each_layer_reports_its_tokens_as_the_sum_of_its_parts(session, agent, alice):
    set_fact(user=alice, agent=agent, key="name", value="Alice", actor="user")
    append_notes(topic=session.active_topic(), text="scratch")
    add_messages(session, 4)
    stack = assemble_context(session=session, working_memory="w" * 40)
    for layer in stack.layers:
        assert layer.tokens == sum(part.tokens for part in layer.parts) > 0
    data = json.loads(json.dumps(stack.as_dict()))
    assert data["tokens"] == sum(layer["tokens"] for layer in data["layers"])
    assert data["messages"] == stack.messages


def test_the_tools_are_the_builtins_first_then_the_extra_ones(session):
    extra = [
        {"type": "function", "function": {"name": "search", "description": "Find things.\nMore."}},
        {"type": "function", "function": {"name": "notes", "description": "An impostor."}},
    ]
    stack = assemble_context(session=session, extra_tools=extra)
    names = [tool["function"]["name"] for tool in stack.tools]
    assert names == ["notes", "important_info", "manage_topic_memory", "recall", "search"]
    tools_part = stack.layer("stable").parts[2]
    assert tools_part.name == "tools"
    assert tools_part.text == (
        "## Tools\nnotes, important_info, manage_topic_memory, recall, search "
        f"(each described in the request's tools)\n{RECALL_HINT}"
    )
    assert "impostor" not in stack.messages[0]["content"]


def test_the_stable_prefix_names_the_tools_without_repeating_their_descriptions(session):
    """Every request carries the tools' schemas; the prefix must not pay for them twice."""
    stack = assemble_context(session=session)
    stable = stack.messages[0]["content"]
    for tool in stack.tools:
        description = tool["function"]["description"]
        assert tool["function"]["name"] in stable
        assert description not in stable
        assert description.split(".")[0] not in stable  # not even its first sentence


@pytest.mark.postgres
def test_the_written_out_session_statement_reads_what_the_orm_builds(session, agent, alice):
    """memory/stores/session_topics.py: its PostgreSQL statement and the ORM's, on a
    session with every kind of row they tell apart."""
    Session.objects.filter(pk=session.pk).update(drift_result="continuing: Ledger")
    active = session.active_topic()
    append_notes(topic=active, text="archived scratch")
    Notes.objects.filter(topic=active).archive()
    append_notes(topic=active, text="working notes")
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")
    bob = make_user("bob-facts", agent.organization)
    set_fact(user=bob, agent=agent, key="city", value="Oslo", actor="user")  # not the scope's
    earlier = add_topic(session, title="Earlier", summary="Was about lunch.")
    add_message(session, Message.Role.ERROR, "failed", topic=earlier)  # never a day
    add_messages(session, 4, topic=earlier)
    add_message(session, Message.Role.ERROR, "failed again", topic=earlier)
    said = Message.objects.filter(topic=earlier).order_by("seq")
    Message.objects.filter(pk=said[0].pk).update(created_at=timezone.now() - timedelta(days=9))
    Message.objects.filter(pk=said[1].pk).update(created_at=timezone.now() - timedelta(days=8))
    Message.objects.filter(pk=said[4].pk).update(created_at=timezone.now() - timedelta(days=7))
    add_topic(session, title="Untold", summary="")  # left out: no summary, not deprecated
    add_topic(session, title="Reversed", summary="", deprecated=True)
    session.refresh_from_db()

    written = session_topics._rows(session)
    assert written == session_topics.orm_rows(session)
    assert [row["title"] for row in written] == ["", "Earlier", "Reversed"]
    first, last = written[1]["first_at"], written[1]["last_at"]
    assert (timezone.now() - first).days == 8 and (timezone.now() - last).days == 7
    assert written[0]["notes_text"] == "working notes"
    assert written[0]["facts"] == {"city": "Lyon"} and "city" in written[0]["provenance"]
    assert written[0]["drift"] == "continuing: Ledger"
    assert all(row["facts"] is None and row["drift"] is None for row in written[1:])


# --- the stable prefix -------------------------------------------------------------------


def test_the_stable_prefix_is_byte_identical_across_turns_with_nothing_changed(
    session, agent, alice
):
    other = Session.objects.start(user=alice, agent=agent)
    add_topic(other, title="Stack", summary="Django.", keep=True)
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")
    add_messages(session, 3)
    first = stable_text(session)
    # A whole turn happens: messages, a tool round, notes; none of it is a stable input.
    add_message(session, Message.Role.USER, "next")
    add_tool_round(session, ["notes"], tag="t2")
    append_notes(topic=session.active_topic(), text="a note")
    add_message(session, Message.Role.ASSISTANT, "done")
    second = stable_text(session)
    assert second.encode() == first.encode()


def test_the_stable_prefix_changes_after_a_promotion_in_another_session(session, agent, alice):
    other = Session.objects.start(user=alice, agent=agent)
    topic = add_topic(other, title="Billing", summary="Stripe, monthly.", messages=2)
    before = stable_text(session)
    do_agent_curation(topic=topic, action="promote")
    after = stable_text(session)
    assert after != before and "Billing: Stripe, monthly." in after


def test_the_stable_prefix_changes_after_a_deprecation(session, agent, alice):
    other = Session.objects.start(user=alice, agent=agent)
    topic = add_topic(other, title="Billing", summary="Stripe, monthly.", keep=True, messages=2)
    before = stable_text(session)
    do_user_curation(topic=topic, state=MemoryState.DEPRECATED, user=alice)
    after = stable_text(session)
    assert after != before
    assert "[DEPRECATED] Billing" in after and "Stripe" not in after


def test_the_stable_prefix_changes_after_a_fact_is_set_or_unset(session, agent, alice):
    before = stable_text(session)
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")
    with_fact = stable_text(session)
    assert with_fact != before and f"- city (set {today()}): Lyon" in with_fact
    unset_fact(user=alice, agent=agent, key="city", actor="user")
    assert stable_text(session) == before


def test_a_promotion_in_this_session_leaves_its_own_stable_prefix_alone(session):
    add_messages(session, 6)
    earlier = add_topic(session, title="Earlier", summary="Kept.", messages=2)
    active = session.active_topic()
    Topic.objects.filter(pk=active.pk).update(title="Now", summary="Now.")
    before = stable_text(session)
    do_agent_curation(topic=active, action="promote")
    do_agent_curation(topic=earlier, action="promote")
    assert stable_text(session) == before


def test_facts_are_rendered_sorted_whatever_the_insertion_order(session, agent, alice):
    for key in ["zeta", "alpha", "mid"]:
        set_fact(user=alice, agent=agent, key=key, value={"b": 1, "a": [2, 3]}, actor="user")
    lines = [line for line in stable_text(session).splitlines() if line.startswith("- ")]
    facts = [line for line in lines if '{"a": [2, 3], "b": 1}' in line]
    assert facts == [
        f'- alpha (set {today()}): {{"a": [2, 3], "b": 1}}',
        f'- mid (set {today()}): {{"a": [2, 3], "b": 1}}',
        f'- zeta (set {today()}): {{"a": [2, 3], "b": 1}}',
    ]


def test_another_users_facts_and_memory_never_reach_the_stack(session, agent, organization):
    bob = make_user("bob", organization)
    bobs = Session.objects.start(user=bob, agent=agent)
    add_topic(bobs, title="Bob's plan", summary="Secret.", keep=True)
    set_fact(user=bob, agent=agent, key="bob-secret", value="hunter2", actor="user")
    text = json.dumps(assemble_context(session=session).as_dict())
    assert "Secret." not in text and "hunter2" not in text and "Bob's plan" not in text


# --- the earlier-topics budget -----------------------------------------------------------


def prior_topics_part(stack):
    return next(p for p in stack.layer("semi_stable").parts if p.name == "prior_topics")


def test_the_earlier_topics_block_is_capped_with_the_oldest_dropped_first(session, settings):
    settings.EARLIER_TOPICS_TOKEN_BUDGET = 100
    topics = [
        add_topic(session, title=f"Topic {i}", summary=f"Decision {i}: " + "x" * 40)
        for i in range(500)
    ]

    stack = assemble_context(session=session)

    block = stack.layer("semi_stable").text
    part = prior_topics_part(stack)
    lines = [line for line in block.splitlines() if line.startswith("- ")]
    newest = topics[-1].pk
    assert lines[-1].startswith(f"- {today()} [#{newest}] Topic 499: Decision 499")  # stays
    assert sum(len(line) // 4 + 1 for line in lines) <= 100
    kept = len(lines)
    assert 0 < kept < 500
    assert stack.dropped_earlier_topics == tuple(f"Topic {i}" for i in range(500 - kept))
    heading = estimate_tokens(f"## Earlier topics in this session\n{EARLIER_TOPICS_INTRO}\n")
    assert part.tokens <= 100 + heading + 1  # the block's heading on top of the budgeted lines
    assert stack.as_dict()["dropped_earlier_topics"][0] == "Topic 0"


def test_the_budget_still_drops_the_oldest_title_lines_first(session, settings):
    settings.EARLIER_TOPICS_TOKEN_BUDGET = 200
    topics = [
        add_topic(session, title=f"Sujet numéro {i}", summary=f"Résumé {i}: " + "é" * 60)
        for i in range(40)
    ]

    stack = assemble_context(session=session)

    part = prior_topics_part(stack)
    lines = part.text.splitlines()[2:]
    dropped = len(stack.dropped_earlier_topics)
    assert 0 < dropped < 37  # some title-only lines survive next to the three summaries
    assert stack.dropped_earlier_topics == tuple(f"Sujet numéro {i}" for i in range(dropped))
    assert lines[0] == f"- {today()} [#{topics[dropped].pk}] Sujet numéro {dropped}"
    assert [line.endswith("é" * 60) for line in lines[-4:]] == [False, True, True, True]
    assert sum(len(line) // 4 + 1 for line in lines) <= 200


def test_earlier_topics_within_the_budget_are_all_shown_and_nothing_is_reported(session):
    lunch = add_topic(session, title="Lunch", summary="Was about lunch.")
    old = add_topic(session, title="Old plan", deprecated=True)

    stack = assemble_context(session=session)

    expected = (
        f"- {today()} [#{lunch.pk}] Lunch: Was about lunch.\n"
        f"- {today()} [#{old.pk}] [DEPRECATED] Old plan"
    )
    assert expected in stack.messages[1]["content"]
    assert stack.dropped_earlier_topics == ()


# --- compact earlier topics --------------------------------------------------------------


def test_only_the_newest_earlier_topics_carry_their_summaries(session, settings):
    assert settings.EARLIER_TOPICS_WITH_SUMMARY == 3
    topics = [
        add_topic(session, title=f"Thème {i}", summary=f"Décidé {i}: le plan {i}.")
        for i in range(5)
    ]

    stack = assemble_context(session=session)

    part = prior_topics_part(stack)
    assert part.text.splitlines() == [
        "## Earlier topics in this session",
        EARLIER_TOPICS_INTRO,
        f"- {today()} [#{topics[0].pk}] Thème 0",
        f"- {today()} [#{topics[1].pk}] Thème 1",
        f"- {today()} [#{topics[2].pk}] Thème 2: Décidé 2: le plan 2.",
        f"- {today()} [#{topics[3].pk}] Thème 3: Décidé 3: le plan 3.",
        f"- {today()} [#{topics[4].pk}] Thème 4: Décidé 4: le plan 4.",
    ]
    assert "Décidé 0" not in json.dumps(stack.messages, ensure_ascii=False)
    assert stack.dropped_earlier_topics == ()


def test_a_deprecated_topic_among_the_newest_stays_title_only(session, settings):
    settings.EARLIER_TOPICS_WITH_SUMMARY = 2
    old = add_topic(session, title="Old", summary="Old plan.")
    reversed_ = add_topic(session, title="Reversed", summary="We picked MySQL.", deprecated=True)
    new = add_topic(session, title="New", summary="New plan.")

    part = prior_topics_part(assemble_context(session=session))

    assert part.text.splitlines()[2:] == [
        f"- {today()} [#{old.pk}] Old",
        f"- {today()} [#{reversed_.pk}] [DEPRECATED] Reversed",
        f"- {today()} [#{new.pk}] New: New plan.",
    ]


def test_the_agent_reads_an_older_topics_summary_through_notes(session, agent, alice, bob):
    """A title-only earlier topic is one notes read away; another session's is refused."""
    topics = [
        add_topic(session, title=f"Тема {i}", summary=f"Итог {i}: выбрали вариант {i}.")
        for i in range(5)
    ]
    semi = assemble_context(session=session).messages[1]["content"]
    assert f"- {today()} [#{topics[0].pk}] Тема 0\n" in semi and "Итог 0" not in semi
    other = add_topic(Session.objects.start(user=alice, agent=agent), title="Чужая", summary="s")
    bobs = add_topic(Session.objects.start(user=bob, agent=agent), title="Боб", summary="s")

    def read(topic_id):
        call = ToolCall(
            id="c1", name="notes", arguments=json.dumps({"operation": "read", "topic_id": topic_id})
        )
        [message] = dispatch_tool_calls(session=session, tool_calls=[call])
        return json.loads(message.content)

    result = read(topics[0].pk)
    assert (result["topic_id"], result["title"], result["summary"]) == (
        topics[0].pk,
        "Тема 0",
        "Итог 0: выбрали вариант 0.",
    )
    for stranger in (other, bobs):
        assert read(stranger.pk) == {"error": f"topic {stranger.pk} is not a topic of this session"}
