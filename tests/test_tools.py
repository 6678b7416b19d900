"""The built-in tools through the dispatcher, as the model calls them."""

import json

import pytest

from memory.actions.context import assemble_context
from memory.actions.curation import do_agent_curation, do_user_curation
from memory.actions.tools import (
    BUILTIN_TOOL_NAMES,
    UNKNOWN_TOOL_NOTE,
    builtin_tool_schemas,
    dispatch_tool_calls,
)
from memory.lib.errors import (
    DEPRECATED_GUARD_ERROR,
    KEEP_IN_MEMORY_GUARD_ERROR,
    USER_POSITION_GUARD_ERROR,
)
from memory.llm import ToolCall
from memory.models import Agent, MemoryDecision, MemoryState, Message, Notes, Session
from memory.stores.facts import read_facts, set_fact
from memory.stores.notes import append_notes, read_notes
from tests.conftest import make_user
from tests.memory_builders import add_messages, add_topic


def call(name, arguments=None, *, raw=None, call_id="call-1"):
    return ToolCall(
        id=call_id, name=name, arguments=raw if raw is not None else json.dumps(arguments)
    )


def run(session, name, arguments=None, *, raw=None, other=None):
    """One call through the dispatcher; returns the parsed result."""
    [message] = dispatch_tool_calls(
        session=session, tool_calls=[call(name, arguments, raw=raw)], other=other
    )
    return json.loads(message.content)


def refreshed(topic):
    topic.refresh_from_db()
    return topic


@pytest.fixture
def topic(session):
    topic = session.active_topic()
    add_messages(session, 2, topic=topic)  # only a topic with messages may enter memory
    return topic


@pytest.fixture
def stranger_topics(agent, organization, alice):
    """A topic of bob's session, and a topic of another session of alice's."""
    bob = make_user("bob", organization)
    bobs = add_topic(Session.objects.start(user=bob, agent=agent), title="Bob's", summary="s")
    alices_other = add_topic(Session.objects.start(user=alice, agent=agent), title="Other")
    return [bobs, alices_other]


@pytest.fixture
def out_of_scope_topics(agent, organization, alice):
    """Topics outside alice's scope with ``agent``: bob's, and alice's with another agent."""
    bob = make_user("bob", organization)
    bobs = add_topic(
        Session.objects.start(user=bob, agent=agent), title="Bob's", summary="s", messages=2
    )
    other_agent = Agent.objects.create(organization=organization, name="Other", soul="x")
    alices = add_topic(
        Session.objects.start(user=alice, agent=other_agent), title="Hers", messages=2
    )
    return [bobs, alices]


# --- the schemas -------------------------------------------------------------------------


def test_the_builtins_come_with_json_schemas_in_a_fixed_order():
    schemas = builtin_tool_schemas()
    assert [s["function"]["name"] for s in schemas] == list(BUILTIN_TOOL_NAMES)
    for schema in schemas:
        assert schema["type"] == "function"
        parameters = schema["function"]["parameters"]
        assert parameters["type"] == "object" and parameters["required"]
        assert schema["function"]["description"]
    assert builtin_tool_schemas() == schemas
    schemas[0]["function"]["name"] = "mutated"
    assert builtin_tool_schemas()[0]["function"]["name"] == "notes"


def test_undeprecation_is_not_offered_to_the_agent():
    manage = builtin_tool_schemas()[2]["function"]
    assert manage["parameters"]["properties"]["action"]["enum"] == [
        "promote",
        "demote",
        "deprecate",
    ]


# --- the dispatcher ----------------------------------------------------------------------


def test_results_are_stored_as_tool_messages_in_the_active_topic_in_order(session, topic):
    messages = dispatch_tool_calls(
        session=session,
        tool_calls=[
            call("notes", {"operation": "$set", "content": "a"}, call_id="c1"),
            call("important_info", {"operation": "read"}, call_id="c2"),
        ],
    )
    stored = list(Message.objects.filter(session=session, role="tool").order_by("seq"))
    assert stored == messages
    assert [(m.role, m.tool_call_id, m.tool_name, m.topic_id) for m in stored] == [
        ("tool", "c1", "notes", topic.pk),
        ("tool", "c2", "important_info", topic.pk),
    ]
    assert [json.loads(m.content) for m in stored] == [
        {"ok": True, "topic_id": topic.pk, "notes": "a"},
        {"facts": {}},
    ]


@pytest.mark.parametrize(
    "name, raw, error",
    [
        ("teleport", "{}", "unknown tool 'teleport'"),
        ("", "{}", "unknown tool ''"),
        ("notes", "{not json", "not valid JSON"),
        ("notes", "[1, 2]", "arguments must be a JSON object"),
        ("notes", "{}", "operation must be one of $set, read, update"),
        ("notes", '{"operation": "delete"}', "operation must be one of"),
        ("notes", '{"operation": "$set"}', "content is required for $set"),
        ("notes", '{"operation": "$set", "content": ""}', "content must be non-empty text"),
        ("notes", '{"operation": "update", "content": 5}', "content must be text"),
        ("notes", '{"operation": "read", "topic_id": "abc"}', "topic_id must be an integer"),
        ("notes", '{"operation": "read", "topic_id": true}', "topic_id must be an integer"),
        ("notes", '{"operation": "read", "colour": 1}', "unexpected field(s) colour"),
        ("important_info", '{"operation": "$set", "value": 1}', "key must be a non-empty string"),
        ("important_info", '{"operation": "$set", "key": "k"}', "value is required for $set"),
        ("important_info", '{"operation": "$unset"}', "key must be a non-empty string"),
        ("important_info", '{"operation": "$set", "key": "k", "value": null}', "use $unset"),
        ("manage_topic_memory", "{}", "action is required"),
        ("manage_topic_memory", '{"action": 3}', "action is required"),
    ],
)
def test_bad_calls_get_an_error_result_and_never_raise(session, name, raw, error):
    result = run(session, name, raw=raw)
    # An invented tool's error also says what to do instead.
    assert set(result) == ({"error", "note"} if error.startswith("unknown tool") else {"error"})
    assert error in result["error"]
    assert not Notes.objects.exists() and read_facts(user=session.user, agent=session.agent) == {}


def test_a_call_without_arguments_is_read_as_an_empty_object(session):
    assert run(session, "important_info", raw="") == {
        "error": "operation must be one of $set, read, $unset; got None"
    }


class Source:
    def __init__(self, *, fail=False):
        self.calls, self.fail = [], fail

    def has_tool(self, name):
        return name in {"search", "notes"}

    def call(self, name, arguments):
        self.calls.append((name, arguments))
        if self.fail:
            raise RuntimeError("server went away\nwith a traceback")
        return f"found {arguments['q']}"


def test_a_builtin_name_always_wins_over_another_source(session):
    source = Source()
    result = run(session, "notes", {"operation": "$set", "content": "mine"}, other=source)
    assert result["ok"] is True and source.calls == []


def test_other_tools_are_called_after_the_builtins_and_their_failures_reported(session):
    source = Source()
    assert run(session, "search", {"q": "cats"}, other=source) == {"result": "found cats"}
    assert source.calls == [("search", {"q": "cats"})]
    failing = run(session, "search", {"q": "dogs"}, other=Source(fail=True))
    assert failing == {"error": "search failed: server went away with a traceback"}
    assert run(session, "missing", {}, other=source) == {
        "error": "unknown tool 'missing'",
        "note": UNKNOWN_TOOL_NOTE,
    }


def test_an_unexpected_failure_inside_a_builtin_is_an_error_result(session, monkeypatch):
    import memory.actions.tools as tools

    def broken(**kwargs):
        raise RuntimeError("database on fire")

    monkeypatch.setattr(tools, "append_notes", broken)
    result = run(session, "notes", {"operation": "$set", "content": "x"})
    assert result == {"error": "notes failed unexpectedly; nothing was changed"}
    # The turn goes on: the next call still works.
    assert run(session, "important_info", {"operation": "read"}) == {"facts": {}}


# --- notes -------------------------------------------------------------------------------


def test_notes_set_appends_while_update_replaces(session, topic):
    run(session, "notes", {"operation": "$set", "content": "Chose MySQL."})
    result = run(session, "notes", {"operation": "$set", "content": "Added Redis."})
    assert result["notes"] == "Chose MySQL.\nAdded Redis."
    result = run(session, "notes", {"operation": "update", "content": "Chose Postgres."})
    assert result == {"ok": True, "topic_id": topic.pk, "notes": "Chose Postgres."}
    assert read_notes(topic_id=topic.pk) == "Chose Postgres."


def test_notes_read_the_current_topic_or_another_topic_of_the_session(session, topic):
    append_notes(topic=topic, text="current")
    earlier = add_topic(session, title="Earlier", summary="Picked the blue theme.")
    append_notes(topic=earlier, text="earlier notes")
    Notes.objects.filter(topic=earlier).archive()
    assert run(session, "notes", {"operation": "read"}) == {
        "topic_id": topic.pk,
        "notes": "current",
        "archived": False,
    }
    assert run(session, "notes", {"operation": "read", "topic_id": f"#{topic.pk}"}) == {
        "topic_id": topic.pk,
        "notes": "current",
        "archived": False,
    }
    assert run(session, "notes", {"operation": "read", "topic_id": earlier.pk}) == {
        "topic_id": earlier.pk,
        "title": "Earlier",
        "summary": "Picked the blue theme.",
        "deprecated": False,
        "notes": "earlier notes",
        "archived": True,
    }


def test_notes_read_of_a_deprecated_topic_gives_its_title_but_not_its_summary(session):
    reversed_ = add_topic(session, title="DB", summary="We chose MySQL.", deprecated=True)
    result = run(session, "notes", {"operation": "read", "topic_id": reversed_.pk})
    assert result == {
        "topic_id": reversed_.pk,
        "title": "DB",
        "summary": "",
        "deprecated": True,
        "notes": "",
        "archived": False,
    }


def test_notes_are_only_written_for_the_current_topic(session):
    earlier = add_topic(session, title="Earlier")
    result = run(session, "notes", {"operation": "$set", "content": "x", "topic_id": earlier.pk})
    assert result == {"error": "notes can only be written for the current topic"}
    assert not Notes.objects.exists()


# --- important_info ----------------------------------------------------------------------


def test_important_info_sets_reads_and_unsets_facts_of_the_sessions_scope(session, alice, agent):
    assert run(
        session, "important_info", {"operation": "$set", "key": " city ", "value": "Lyon"}
    ) == {
        "ok": True,
        "key": "city",
        "value": "Lyon",
    }
    run(session, "important_info", {"operation": "$set", "key": "age", "value": 41})
    assert read_facts(user=alice, agent=agent) == {"city": "Lyon", "age": 41}
    assert run(session, "important_info", {"operation": "read"}) == {
        "facts": {"age": 41, "city": "Lyon"}
    }
    city = run(session, "important_info", {"operation": "read", "key": "city"})
    assert (city["key"], city["found"], city["value"]) == ("city", True, "Lyon")
    assert city["provenance"]["actor"] == "agent"
    assert city["provenance"]["topic_id"] == session.active_topic().pk
    assert [change["new_value"] for change in city["history"]] == ["Lyon"]
    assert run(session, "important_info", {"operation": "read", "key": "zip"}) == {
        "key": "zip",
        "found": False,
    }
    assert run(session, "important_info", {"operation": "$unset", "key": "city"}) == {
        "ok": True,
        "key": "city",
        "removed": True,
    }
    assert read_facts(user=alice, agent=agent) == {"age": 41}


def test_important_info_never_reads_another_users_facts(session, agent, organization):
    bob = make_user("bob", organization)
    set_fact(user=bob, agent=agent, key="secret", value="hunter2", actor="user")
    assert run(session, "important_info", {"operation": "read"}) == {"facts": {}}
    assert run(session, "important_info", {"operation": "read", "key": "secret"}) == {
        "key": "secret",
        "found": False,
    }


# --- manage_topic_memory -----------------------------------------------------------------


@pytest.mark.parametrize("action, state", [("promote", "promoted"), ("deprecate", "deprecated")])
def test_the_agent_curates_the_current_topic_by_default(session, topic, action, state):
    result = run(session, "manage_topic_memory", {"action": action})
    assert result == {
        "ok": True,
        "topic_id": topic.pk,
        "title": "m1",  # summarized first (the offline model's fallback): never untitled
        "memory_state": state,
        "changed": True,
    }
    assert refreshed(topic).memory_state == state
    assert MemoryDecision.objects.get().actor == "agent"


def test_the_agent_curates_another_topic_of_the_session_by_id(session):
    earlier = add_topic(session, title="Earlier", summary="Kept.", keep=True)
    result = run(session, "manage_topic_memory", {"action": "demote", "topic_id": earlier.pk})
    assert result["memory_state"] == "none" and result["changed"] is True
    assert refreshed(earlier).memory_state == MemoryState.NONE


def test_a_repeated_action_reports_no_change(session, topic):
    run(session, "manage_topic_memory", {"action": "promote"})
    assert run(session, "manage_topic_memory", {"action": "promote"})["changed"] is False


@pytest.mark.parametrize(
    "user_state, action, error",
    [
        (MemoryState.PROMOTED, "promote", KEEP_IN_MEMORY_GUARD_ERROR),
        (MemoryState.PROMOTED, "demote", KEEP_IN_MEMORY_GUARD_ERROR),
        (MemoryState.NONE, "promote", KEEP_IN_MEMORY_GUARD_ERROR),
        (MemoryState.DEPRECATED, "deprecate", DEPRECATED_GUARD_ERROR),
    ],
)
def test_the_guard_refuses_the_agent_with_the_exact_text(
    session, topic, alice, user_state, action, error
):
    do_user_curation(topic=topic, state=user_state, user=alice)
    before = refreshed(topic).memory_state
    assert run(session, "manage_topic_memory", {"action": action}) == {"error": error}
    assert refreshed(topic).memory_state == before


def test_the_guard_text_for_deprecate_after_a_user_undeprecation(session, topic, alice):
    do_user_curation(topic=topic, state=MemoryState.DEPRECATED, user=alice)
    do_user_curation(topic=topic, state=MemoryState.NONE, user=alice)
    assert run(session, "manage_topic_memory", {"action": "deprecate"}) == {
        "error": DEPRECATED_GUARD_ERROR
    }
    assert KEEP_IN_MEMORY_GUARD_ERROR == (
        "keepInMemory was set manually by the user; the agent cannot override it."
    )


@pytest.mark.parametrize("action", ["undeprecate", "restore", "promote", "demote", "none"])
def test_the_agent_can_never_undeprecate(session, topic, action):
    do_agent_curation(topic=topic, action="deprecate")
    result = run(session, "manage_topic_memory", {"action": action})
    assert set(result) == {"error"}
    assert refreshed(topic).memory_state == MemoryState.DEPRECATED


# --- a stranger's topic ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("notes", {"operation": "read"}),
        ("notes", {"operation": "$set", "content": "x"}),
        ("notes", {"operation": "update", "content": "x"}),
    ],
)
def test_a_strangers_topic_id_is_refused_and_never_read(session, stranger_topics, name, arguments):
    for stranger in stranger_topics:
        append_notes(topic=stranger, text="private notes")
    missing_id = max(t.pk for t in stranger_topics) + 1000
    for topic_id in [*(t.pk for t in stranger_topics), missing_id]:
        result = run(session, name, {**arguments, "topic_id": topic_id})
        assert result == {"error": f"topic {topic_id} is not a topic of this session"}
    for stranger in stranger_topics:
        stranger.refresh_from_db()
        assert stranger.memory_state == MemoryState.NONE
        assert read_notes(topic_id=stranger.pk) == "private notes"
    assert not MemoryDecision.objects.exists()


@pytest.mark.parametrize("action", ["promote", "demote", "deprecate"])
def test_manage_topic_memory_refuses_a_topic_outside_the_scope(
    session, out_of_scope_topics, action
):
    for stranger in out_of_scope_topics:
        do_agent_curation(topic=stranger, action="promote")  # so that demote would change it
    MemoryDecision.objects.all().delete()
    missing_id = max(t.pk for t in out_of_scope_topics) + 1000
    for topic_id in [*(t.pk for t in out_of_scope_topics), missing_id]:
        result = run(session, "manage_topic_memory", {"action": action, "topic_id": topic_id})
        assert result == {"error": f"topic {topic_id} is not one of your topics with this user"}
    for stranger in out_of_scope_topics:
        assert refreshed(stranger).memory_state == MemoryState.PROMOTED
    assert not MemoryDecision.objects.exists()


def test_the_agent_deprecates_a_topic_of_an_earlier_session_by_id(session, alice, agent):
    """The memory block names the earlier session's topic [#id]; the agent deprecates it."""
    earlier_session = Session.objects.start(user=alice, agent=agent)
    db_choice = add_topic(
        earlier_session, title="DB choice", summary="We chose MySQL.", keep=True, messages=2
    )
    memory = assemble_context(session=session).layer("stable").text
    assert f"[#{db_choice.pk}] DB choice: We chose MySQL." in memory

    result = run(session, "manage_topic_memory", {"action": "deprecate", "topic_id": db_choice.pk})

    assert result["ok"] is True and result["memory_state"] == "deprecated"
    memory = assemble_context(session=session).layer("stable").text
    assert f"[#{db_choice.pk}] [DEPRECATED] DB choice" in memory and "MySQL" not in memory
    decision = MemoryDecision.objects.get(topic=db_choice)
    assert (decision.actor, decision.to_state) == ("agent", "deprecated")


@pytest.mark.parametrize("user_state", [MemoryState.PROMOTED, MemoryState.NONE])
def test_the_agents_deprecate_of_a_topic_the_user_decided_on_is_refused(
    session, alice, agent, user_state
):
    earlier_session = Session.objects.start(user=alice, agent=agent)
    decided = add_topic(earlier_session, title="Stack", summary="Django.", keep=True, messages=2)
    do_user_curation(topic=decided, state=user_state, user=alice)

    result = run(session, "manage_topic_memory", {"action": "deprecate", "topic_id": decided.pk})

    assert result == {"error": USER_POSITION_GUARD_ERROR}
    assert "brain icon" in result["error"]
    assert refreshed(decided).memory_state == user_state
    assert not MemoryDecision.objects.filter(actor="agent").exists()


def test_important_info_refuses_a_topic_id_outright(session, stranger_topics):
    result = run(
        session, "important_info", {"operation": "read", "topic_id": stranger_topics[0].pk}
    )
    assert result == {
        "error": "unexpected field(s) topic_id; important_info takes operation, key, value"
    }
