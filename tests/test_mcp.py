"""MCP tools: a real stdio server (tests/mcp_echo_server.py) joined to the agent's turn."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from memory.actions.mcp import McpToolError, McpToolSource, namespaced_tool_name
from memory.actions.turn import do_send_message
from memory.stores.facts import read_facts
from memory.stores.notes import read_notes

ECHO_SERVER = {
    "name": "echo",
    "command": [sys.executable, str(Path(__file__).with_name("mcp_echo_server.py"))],
}
MISSING_SERVER = {"name": "gone", "command": ["/nonexistent/mcp-server"]}
BUILTINS = ["notes", "important_info", "manage_topic_memory", "recall"]


@pytest.fixture
def with_servers(agent, settings):
    """The operator declares the servers (settings.MCP_SERVERS); the agent names them."""

    def configure(*servers):
        settings.MCP_SERVERS = {server["name"]: server for server in servers}
        agent.mcp_servers = [server["name"] for server in servers]
        agent.save(update_fields=["mcp_servers"])

    return configure


def tool_names(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request["tools"]]


def test_its_tools_are_listed_after_the_builtins_namespaced(session, fake_openai, with_servers):
    with_servers(ECHO_SERVER)

    do_send_message(session=session, content="What can you do?")

    assert tool_names(fake_openai.requests[0]) == [
        *BUILTINS,
        "mcp__echo__echo",
        "mcp__echo__fail",
        "mcp__echo__notes",
    ]
    echo = fake_openai.requests[0]["tools"][len(BUILTINS)]["function"]
    assert echo["parameters"]["properties"]["text"]["type"] == "string"
    assert echo["description"] == "[MCP server echo] Repeat the text back."


def test_the_model_calls_an_mcp_tool_and_sees_its_result(session, fake_openai, with_servers):
    with_servers(ECHO_SERVER)
    (call_id,) = fake_openai.reply_tool_calls([("mcp__echo__echo", {"text": "ping"})])
    fake_openai.reply_text("The server said ping back.")

    result = do_send_message(session=session, content="Echo ping")

    tool_message = result.activity[1]
    assert tool_message.tool_name == "mcp__echo__echo"
    assert json.loads(tool_message.content) == {"result": "echo: ping"}
    assert fake_openai.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": tool_message.content,
    }
    assert result.reply.content == "The server said ping back."


def test_an_mcp_tool_named_like_a_builtin_never_shadows_it(session, fake_openai, with_servers):
    with_servers(ECHO_SERVER)
    fake_openai.reply_tool_calls([("notes", {"operation": "$set", "content": "built-in wins"})])
    fake_openai.reply_text("Noted.")

    result = do_send_message(session=session, content="Take a note")

    assert "built-in wins" in read_notes(topic_id=session.active_topic().pk)
    assert "mcp notes" not in result.activity[1].content


def test_a_tool_error_reaches_the_model_as_an_error_result(session, fake_openai, with_servers):
    with_servers(ECHO_SERVER)
    fake_openai.reply_tool_calls([("mcp__echo__fail", {"reason": "disk full"})])
    fake_openai.reply_text("That failed.")

    result = do_send_message(session=session, content="Try the failing tool")

    error = json.loads(result.activity[1].content)["error"]
    assert "disk full" in error
    assert result.failure is None


def test_with_the_server_missing_the_turn_still_completes_with_the_builtins(
    session, alice, agent, fake_openai, with_servers
):
    with_servers(MISSING_SERVER)
    fake_openai.reply_tool_calls(
        [
            ("important_info", {"operation": "$set", "key": "tea", "value": "green"}),
            ("mcp__gone__search", {"query": "tea"}),
        ]
    )
    fake_openai.reply_text("Saved; the search server is down.")

    result = do_send_message(session=session, content="Remember green tea and search it")

    assert result.failure is None
    assert tool_names(fake_openai.requests[0]) == BUILTINS
    working_memory = fake_openai.requests[0]["messages"][-1]
    assert working_memory["role"] == "system"
    assert "MCP server 'gone' is unavailable" in working_memory["content"]
    assert read_facts(user=alice, agent=agent) == {"tea": "green"}
    search_error = json.loads(result.activity[2].content)["error"]
    assert "MCP server 'gone' is unavailable" in search_error
    assert "/nonexistent/mcp-server" in search_error
    assert result.reply.content == "Saved; the search server is down."


def test_a_reachable_server_still_works_beside_a_missing_one(session, fake_openai, with_servers):
    with_servers(MISSING_SERVER, ECHO_SERVER)

    do_send_message(session=session, content="Hi")

    assert tool_names(fake_openai.requests[0])[len(BUILTINS) :] == [
        "mcp__echo__echo",
        "mcp__echo__fail",
        "mcp__echo__notes",
    ]


@pytest.mark.parametrize(
    "spec, reason",
    [
        (["not an object"], "not a JSON object"),
        ("undeclared", "not declared in the deployment configuration"),
        ({"command": ["x"]}, 'no "name"'),
        ({"name": "both", "command": ["x"], "url": "http://x"}, "exactly one of"),
        ({"name": "empty", "command": []}, "non-empty list of strings"),
        ({"name": "ftp", "url": "ftp://example.com"}, "http:// or https:// URL"),
    ],
)
def test_an_invalid_server_entry_is_reported_not_raised(spec, reason):
    with McpToolSource([spec]) as source:
        assert source.tool_schemas == []
        (error,) = source.unavailable.values()
        assert reason in error


def test_an_unreachable_http_server_is_reported_and_its_tools_fail_readably():
    with McpToolSource(
        [{"name": "web", "url": "http://127.0.0.1:9/mcp"}], connect_timeout=5
    ) as source:
        assert "could not connect" in source.unavailable["web"]
        assert source.has_tool("mcp__web__fetch")
        with pytest.raises(McpToolError, match="MCP server 'web' is unavailable"):
            source.call("mcp__web__fetch", {})


def test_a_server_that_never_answers_is_given_up_after_the_connect_timeout():
    silent = {"name": "silent", "command": [sys.executable, "-c", "import time; time.sleep(60)"]}
    with McpToolSource([silent], connect_timeout=0.5) as source:
        assert "did not answer within 0.5s" in source.unavailable["silent"]


def test_a_setting_that_is_not_a_list_is_reported_not_raised():
    with McpToolSource({"name": "echo"}) as source:
        assert "not a JSON list" in source.unavailable["mcp_servers"]


def test_names_are_namespaced_sanitized_and_fit_the_openai_limit():
    assert namespaced_tool_name("my files", "read.file") == "mcp__my_files__read_file"
    # A slug never holds "__", so a server's part of the name cannot swallow another's.
    assert namespaced_tool_name("a__b", "x") == "mcp__a_b__x"
    long = namespaced_tool_name("s" * 40, "t" * 40)
    assert long.startswith("mcp__sss") and len(long) == 64


def test_a_name_the_operator_did_not_declare_never_runs(session, fake_openai, agent, settings):
    settings.MCP_SERVERS = {"echo": ECHO_SERVER}
    # Whatever reached the database (an old definition, an undeclared name) is not run.
    agent.mcp_servers = ["echo", "undeclared", {"name": "x", "command": ["sh", "-c", "id"]}]
    agent.save(update_fields=["mcp_servers"])

    do_send_message(session=session, content="What can you do?")

    assert tool_names(fake_openai.requests[0]) == [
        *BUILTINS,
        "mcp__echo__echo",
        "mcp__echo__fail",
        "mcp__echo__notes",
    ]
    working_memory = json.dumps(fake_openai.requests[0]["messages"])
    assert "'undeclared' is unavailable in this turn: not declared" in working_memory
    assert "not a server name" in working_memory
