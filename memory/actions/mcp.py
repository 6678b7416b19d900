"""An agent's MCP servers as a tool source for the turn.

The operator declares the servers in the deployment configuration (``MCP_SERVERS``, read
from ``DRIFTLESS_MCP_SERVERS`` or ``DRIFTLESS_MCP_SERVERS_FILE``): ``{"name": "files",
"command": ["python", "server.py"]}`` (stdio) or ``{"name": "web", "url":
"http://127.0.0.1:9000/mcp"}`` (streamable HTTP). An agent only names the servers it uses
(``Agent.mcp_servers``, see :func:`declared_servers`): nothing typed in the admin or stored
in the database ever becomes a command or a URL. Their tools join the model's tools list
after the built-ins, named ``mcp__<server>__<tool>``: a built-in name never starts that
way, so an MCP tool can never shadow one.

The official ``mcp`` client is asynchronous while the turn is a plain synchronous
function running in its own worker thread. :class:`McpToolSource` therefore owns a
private asyncio event loop in that thread, created for one turn: one task per server
holds its connection open (the client must be entered and left in one task), and each
sync call runs the loop until its answer arrives. Between calls the loop simply waits.
Every wait is bounded, and a server that cannot be reached, times out or breaks is
reported, never fatal: the built-in tools keep working, the turn's working memory says
which servers are down, and a call to one of their tools fails with a result saying why.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from django.conf import settings
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, Implementation, TextContent

from memory.lib.text import one_line
from memory.lib.validation import storable_text

logger = logging.getLogger(__name__)

TOOL_PREFIX = "mcp__"
CONNECT_TIMEOUT_SECONDS = 10.0
CALL_TIMEOUT_SECONDS = 30.0
CLOSE_TIMEOUT_SECONDS = 5.0
_MAX_LIST_PAGES = 20
_OPENAI_NAME_LIMIT = 64  # function names: ^[a-zA-Z0-9_-]{1,64}$
_NOT_A_NAME_CHAR = re.compile(r"[^A-Za-z0-9-]+")
_CLIENT_INFO = Implementation(name="driftless", version="1.0")


def namespaced_tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``; always starts with ``mcp__``."""
    name = f"{TOOL_PREFIX}{_slug(server)}__{_slug(tool)}"
    return name[:_OPENAI_NAME_LIMIT]


def _slug(text: str) -> str:
    """Letters, digits, - and single underscores: a slug never holds ``__``, so the
    server part of a namespaced name is unambiguous."""
    return _NOT_A_NAME_CHAR.sub("_", text).strip("_") or "x"


@dataclass
class _Server:
    """One configured server, its connection task and what it offers."""

    name: str
    target: StdioServerParameters | str | None
    error: str = ""
    tools: dict[str, str] = field(default_factory=dict)  # namespaced name -> server's name
    schemas: list[dict] = field(default_factory=list)
    task: asyncio.Task | None = None
    ready: asyncio.Future | None = None
    requests: asyncio.Queue | None = None

    @property
    def prefix(self) -> str:
        return f"{TOOL_PREFIX}{_slug(self.name)}__"

    @property
    def available(self) -> bool:
        return not self.error and self.task is not None and not self.task.done()


def declared_servers(names: object) -> object:
    """The operator's declarations of the servers an agent names. A name the configuration
    does not declare (or anything that is not a name) stays unresolved and is reported as
    unavailable in the turn; it never runs."""
    if not isinstance(names, list | tuple):
        return names
    return [
        settings.MCP_SERVERS.get(name, name) if isinstance(name, str) else _NOT_A_NAME
        for name in names
    ]


_NOT_A_NAME = "(an entry that is not a server name)"


def _target(spec: object) -> tuple[str, StdioServerParameters | str | None, str]:
    """(name, client target, error) of one server declaration; error when it is invalid."""
    if isinstance(spec, str):
        return spec, None, "not declared in the deployment configuration (DRIFTLESS_MCP_SERVERS)"
    if not isinstance(spec, dict):
        return "?", None, "the server entry is not a JSON object"
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip():
        return "?", None, 'the server entry has no "name"'
    command, url = spec.get("command"), spec.get("url")
    if command is not None and url is None:
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(part, str) and part for part in command)
        ):
            return name, None, '"command" must be a non-empty list of strings'
        return name, StdioServerParameters(command=command[0], args=command[1:]), ""
    if url is not None and command is None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return name, None, '"url" must be an http:// or https:// URL'
        return name, url, ""
    return name, None, 'give exactly one of "command" (stdio) or "url" (streamable HTTP)'


class McpToolError(Exception):
    """A tool call that did not produce a result; the message is for the model."""


class McpToolSource:
    """The tools of an agent's MCP servers for one turn; implements ``ToolSource``.

    Use it as a context manager around the turn: entering connects to every server
    (concurrently, bounded by ``connect_timeout``) and lists their tools; leaving closes
    the connections and stops stdio servers.
    """

    def __init__(
        self,
        servers: Sequence[object],
        *,
        connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
        call_timeout: float = CALL_TIMEOUT_SECONDS,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: list[_Server] = []
        seen: set[str] = set()
        if not isinstance(servers, list | tuple):
            error = "the agent's mcp_servers setting is not a JSON list"
            self._servers.append(_Server(name="mcp_servers", target=None, error=error))
            servers = []
        for spec in servers:
            name, target, error = _target(spec)
            server = _Server(name=name, target=target, error=error)
            if not error and _slug(name) in seen:
                server.error = "another server of this agent already uses this name"
            seen.add(_slug(name))
            self._servers.append(server)

    # --- what the turn reads ---------------------------------------------------------

    @property
    def tool_schemas(self) -> list[dict]:
        """OpenAI function schemas of the reachable servers' tools, in a stable order."""
        return [schema for server in self._servers for schema in server.schemas]

    @property
    def unavailable(self) -> dict[str, str]:
        """Server name -> why it cannot be used in this turn."""
        return {server.name: server.error for server in self._servers if server.error}

    def status_note(self) -> str:
        """One line per unreachable server, for the turn's working memory (the server's
        error text on one line: it cannot start a line of the prompt)."""
        return "\n".join(
            f"MCP server {name!r} is unavailable in this turn: {one_line(str(error), 300)}"
            for name, error in self.unavailable.items()
        )

    def has_tool(self, name: str) -> bool:
        """True for a listed tool, and for any tool name of a server that is down, so the
        call still reaches :meth:`call` and its result says what went wrong."""
        server = self._server_for(name)
        return server is not None and (bool(server.error) or name in server.tools)

    def call(self, name: str, arguments: dict) -> str:
        """Call a tool and return its text; raises McpToolError with a readable reason
        (server down, timeout, tool error), which the dispatcher shows to the model."""
        server = self._server_for(name)
        if server is None:
            raise McpToolError(f"{name!r} is not a tool of this agent's MCP servers")
        if not server.available:
            reason = server.error or "its connection is closed"
            raise McpToolError(f"MCP server {server.name!r} is unavailable: {reason}")
        if name not in server.tools:
            raise McpToolError(f"MCP server {server.name!r} has no tool {name!r}")
        assert self._loop is not None and server.requests is not None
        reply: asyncio.Future = self._loop.create_future()
        server.requests.put_nowait((server.tools[name], arguments, reply))
        try:
            # The client's own read timeout ends a slow call first; this is the backstop.
            result = self._loop.run_until_complete(
                asyncio.wait_for(reply, timeout=self._call_timeout + 1)
            )
        except TimeoutError as err:
            raise McpToolError(
                f"MCP server {server.name!r} did not answer within {self._call_timeout:g}s"
            ) from err
        except Exception as err:
            raise McpToolError(f"MCP server {server.name!r}: {_describe(err)}") from err
        text = _result_text(result)
        if result.is_error:
            raise McpToolError(text or "the tool reported an error")
        return text

    def _server_for(self, name: str) -> _Server | None:
        if not name.startswith(TOOL_PREFIX):
            return None
        return next((s for s in self._servers if name.startswith(s.prefix)), None)

    # --- connecting and closing ------------------------------------------------------

    def __enter__(self) -> McpToolSource:
        candidates = [server for server in self._servers if not server.error]
        if not candidates:
            return self
        self._loop = asyncio.new_event_loop()
        for server in candidates:
            server.ready = self._loop.create_future()
            server.requests = asyncio.Queue()
            server.task = self._loop.create_task(self._serve(server))
        self._loop.run_until_complete(
            asyncio.wait([server.ready for server in candidates], timeout=self._connect_timeout)
        )
        for server in candidates:
            self._take_listing(server)
        return self

    def _take_listing(self, server: _Server) -> None:
        assert server.ready is not None
        if not server.ready.done():
            server.error = f"it did not answer within {self._connect_timeout:g}s"
            return
        if server.ready.exception() is not None:
            server.error = f"could not connect: {_describe(server.ready.exception())}"
            return
        for tool in sorted(server.ready.result(), key=lambda tool: tool.name):
            name = namespaced_tool_name(server.name, tool.name)
            if name in server.tools:
                logger.warning("MCP server %s: tool %s clashes after renaming", server.name, name)
                continue
            server.tools[name] = tool.name
            description = tool.description or tool.title or tool.name
            server.schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": f"[MCP server {server.name}] {description}",
                        "parameters": tool.input_schema or {"type": "object", "properties": {}},
                    },
                }
            )

    async def _serve(self, server: _Server) -> None:
        """Hold one server's connection for the turn, answering call requests in order."""
        assert server.ready is not None and server.requests is not None
        try:
            async with Client(
                server.target,
                read_timeout_seconds=self._call_timeout,
                client_info=_CLIENT_INFO,
            ) as client:
                server.ready.set_result(await _list_tools(client))
                while (request := await server.requests.get()) is not None:
                    tool, arguments, reply = request
                    try:
                        result = await client.call_tool(tool, arguments)
                    except Exception as err:
                        if not reply.done():
                            reply.set_exception(err)
                    else:
                        if not reply.done():
                            reply.set_result(result)
        except Exception as err:
            logger.warning("MCP server %s failed: %s", server.name, _describe(err))
            if not server.ready.done():
                server.ready.set_exception(err)
            server.error = server.error or f"the connection broke: {_describe(err)}"
        finally:
            _fail_pending(server)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        loop = self._loop
        if loop is None:
            return
        self._loop = None
        tasks = [server.task for server in self._servers if server.task is not None]
        for server in self._servers:
            if server.task is None:
                continue
            if server.ready is not None and server.ready.done():
                server.requests.put_nowait(None)  # a clean goodbye
            else:
                server.task.cancel()  # still connecting after the timeout: give up now
        try:
            _, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_SECONDS))
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=CLOSE_TIMEOUT_SECONDS))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


async def _list_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(_MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _fail_pending(server: _Server) -> None:
    """Answer calls still queued for a server whose connection ended."""
    if server.requests is None:
        return
    while not server.requests.empty():
        request = server.requests.get_nowait()
        if request is not None and not request[2].done():
            request[2].set_exception(ConnectionError("the MCP server connection ended"))


def _result_text(result: CallToolResult) -> str:
    """The text blocks of a result (the dispatcher cuts long ones)."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return storable_text("\n".join(parts))


def _describe(err: BaseException | None) -> str:
    """A one-line account of an exception, unwrapping anyio's exception groups."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    if err is None:
        return "unknown error"
    text = " ".join(str(err).split())[:200]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
