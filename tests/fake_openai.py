"""A scripted OpenAI-compatible HTTP server for the test suite, and its pytest fixture.

The `openai` 3.x client talks through httpx2, which respx-style mocks cannot see, so the
tests run a real (tiny) server on 127.0.0.1 instead: the real client code, SSE parsing,
timeouts and error mapping all run exactly as in production.

Tests script the answers: each `reply_*`, `fail`, `hang`, `fail_mid_stream` or
`stall_mid_stream` call queues one response, served in order to the next requests
(streaming or not, whichever the request asks for). When the queue is empty the server
answers `default_text`, or what `responder(body)` returns (content and usage) when one is
given (the benchmarks' models).
`refuse_response_formats` makes the server refuse a `response_format` type from then on.

    def test_summary(fake_openai):
        fake_openai.reply_json({"title": "Trip", "summary": "...", "include_in_memory": True})
        ...
        assert fake_openai.requests[0]["response_format"]["type"] == "json_schema"
"""

from __future__ import annotations

import json
import random
import re
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest

from memory.actions.consolidation import CONSOLIDATION_SCHEMA_NAME, SUBJECTS_SCHEMA_NAME
from memory.llm import Usage, clear_client_cache

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
# How often the server loop checks for shutdown: bounds how long close() takes.
_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class _Script:
    """One queued response."""

    content: str = ""
    tool_calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, raw arguments)
    usage: Usage | None = None
    status: int = 200
    error_message: str = ""
    delay: float = 0.0
    cut_after: int | None = None  # break the response after this many text deltas
    cut_mode: Literal["drop", "garbage", "end", "error"] = "drop"
    error_status: int = 500  # the code an "error" cut names in its error event
    stall_after: int | None = None  # streaming: pause after this many text deltas...
    stall_seconds: float = 0.0  # ...for this long, then send the rest
    cut_by_max_tokens: bool = False  # the request's max_tokens ended the answer


class FakeOpenAI:
    """The scripted server. Constructing it starts it; `close()` stops it.

    `requests` holds the parsed JSON bodies received, in order, and `headers` their
    headers (lower-cased names), so tests can assert on what the client sent.
    """

    def __init__(
        self,
        *,
        default_text: str = "Hello from the fake model.",
        responder: Callable[[dict], tuple[str, Usage | None]] | None = None,
        fail_ratio: float = 0.0,
        seed: int = 0,
        port: int = 0,
    ) -> None:
        """Unscripted requests get ``responder(body)`` (or ``default_text``); a share
        ``fail_ratio`` of them fails with HTTP 500 instead, drawn from ``seed``. It listens
        on 127.0.0.1:``port`` (0: a free one)."""
        self.default_text = default_text
        self.responder = responder
        self.fail_ratio = fail_ratio
        self.injected_failures = 0
        self._random = random.Random(seed)
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        # Called with each request's body, in the server's thread, before it is answered
        # (e.g. to check from another database connection what the caller holds locked).
        self.on_request: Callable[[dict], None] | None = None
        self._queue: deque[_Script] = deque()
        # Calls of one JSON schema (by its name) answered by ``routes[name](body)`` ahead
        # of the queue, their bodies kept in ``routed``, not ``requests``.
        self.routes: dict[str, Callable[[dict], str]] = {}
        self.routed: list[dict] = []
        # Calls of one JSON schema that find the queue empty, answered by
        # ``fallbacks[name](body)`` instead of the default text (kept in ``requests``).
        self.fallbacks: dict[str, Callable[[dict], str]] = {}
        self.refused_formats: frozenset[str] = frozenset()
        # GET /v1/models answers these ids (None: 404, as some servers do); with
        # ``required_key`` every request without ``Authorization: Bearer <it>`` gets 401.
        self.served_models: list[str] | None = None
        self.required_key: str | None = None
        # A request's max_tokens cuts the answer, as real servers do; False: a server that
        # ignores it, so what the client does with an overlong answer can be tested.
        self.honours_max_tokens = True
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._call_count = 0
        handler = type("Handler", (_ChatHandler,), {"fake": self})
        self._server = _Server(("127.0.0.1", port), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            args=(_POLL_SECONDS,),
            name="fake-openai",
            daemon=True,
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def pending(self) -> int:
        """How many queued responses have not been served yet."""
        with self._lock:
            return len(self._queue)

    # --- scripting -----------------------------------------------------------------

    def reply_text(self, content: str, *, usage: Usage | None = None, delay: float = 0.0) -> None:
        """Queue a plain assistant answer (streamed word by word when streaming)."""
        self._push(_Script(content=content, usage=usage, delay=delay))

    def reply_json(self, obj: Any, *, usage: Usage | None = None, delay: float = 0.0) -> None:
        """Queue an answer whose content is `json.dumps(obj)` (for JSON-mode calls)."""
        self.reply_text(json.dumps(obj), usage=usage, delay=delay)

    def reply_raw_content(self, content: str, *, usage: Usage | None = None) -> None:
        """Queue an answer with arbitrary content, e.g. not-JSON for a JSON-mode call."""
        self.reply_text(content, usage=usage)

    def reply_tool_calls(
        self,
        calls: Sequence[tuple[str, dict | str]],
        *,
        content: str = "",
        usage: Usage | None = None,
        delay: float = 0.0,
    ) -> tuple[str, ...]:
        """Queue an answer with tool calls; returns their ids ("call_1", "call_2", ...).

        A dict argument is sent as JSON; a str is sent verbatim (to test malformed
        arguments).
        """
        with self._lock:
            first = self._call_count + 1
            self._call_count += len(calls)
        scripted = tuple(
            (f"call_{first + offset}", name, args if isinstance(args, str) else json.dumps(args))
            for offset, (name, args) in enumerate(calls)
        )
        self._push(_Script(content=content, tool_calls=scripted, usage=usage, delay=delay))
        return tuple(call_id for call_id, _, _ in scripted)

    def name_subjects(self, names: dict[str, str]) -> None:
        """Answer every subject names call of a consolidation (memory/actions/
        consolidation/subjects.py): each entry shown named ``names[its title]``, or not named
        when its title is not there."""

        def answer(body: dict) -> str:
            records = shown_records(body)
            named = [
                {"id": r["id"], "name": names[r["title"]]} for r in records if r["title"] in names
            ]
            return json.dumps({"subjects": named})

        self.routes[SUBJECTS_SCHEMA_NAME] = answer

    def fail(self, status: int = 500, message: str = "fake server error") -> None:
        """Queue an HTTP error with an OpenAI-style error body."""
        self._push(_Script(status=status, error_message=message))

    def hang(self, seconds: float) -> None:
        """Queue a response that waits `seconds` before answering, to provoke timeouts."""
        self._push(_Script(content=self.default_text, delay=seconds))

    def fail_mid_stream(
        self,
        *,
        content: str = "this answer is cut off before it ends",
        after: int = 2,
        mode: Literal["drop", "garbage", "end", "error"] = "drop",
        status: int = 500,
    ) -> None:
        """Queue a response that breaks after `after` text deltas.

        "drop" closes the connection mid-body; "garbage" sends a chunk that is not JSON;
        "end" ends the body cleanly but early (no finish reason, no [DONE]), as a proxy
        that gave up would; "error" sends an error event naming `status` and ends, as
        llama.cpp's server does when it fails after the stream started (it failed to parse
        a tool call). Non-streaming, "garbage", "end" and "error" send half the JSON body.
        """
        self._push(_Script(content=content, cut_after=after, cut_mode=mode, error_status=status))

    def stall_mid_stream(
        self, *, content: str = "this answer pauses midway", after: int = 2, seconds: float
    ) -> None:
        """Queue a streamed answer that goes quiet for ``seconds`` after ``after`` text
        deltas (a server that stalled), then sends the rest, unless the client hung up."""
        self._push(_Script(content=content, stall_after=after, stall_seconds=seconds))

    def refuse_response_formats(self, *types: str) -> None:
        """From now on, answer HTTP 400 to every request whose ``response_format`` has one
        of these types ("json_schema", "json_object"), as servers that lack them do. The
        request is recorded; no scripted response is consumed."""
        with self._lock:
            self.refused_formats = frozenset(types)

    def close(self) -> None:
        """Stop serving; wakes any response still sleeping in `hang`."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- serving -------------------------------------------------------------------

    def propose(self, *operations: dict) -> None:
        """Answer the consolidation calls (one group of entries a call) with the run's
        ``operations``, each once: in the first call that shows what it names first (a
        merge's first id, a supersede's ``old``, a fact's ``key``). A test scripts a run's
        whole proposal at once, whatever its groups; the other calls propose nothing."""
        left = list(operations)

        def answer(body: dict) -> str:
            shown = {record.get("id", record.get("fact")) for record in shown_records(body)}
            mine = [operation for operation in left if _first(operation) in shown]
            left[:] = [operation for operation in left if operation not in mine]
            return json.dumps({"operations": mine})

        self.fallbacks[CONSOLIDATION_SCHEMA_NAME] = answer

    def _push(self, script: _Script) -> None:
        with self._lock:
            self._queue.append(script)

    def _take(self, body: dict, headers: dict[str, str]) -> _Script:
        """Record the request and pop the response scripted for it."""
        response_format = body.get("response_format") or {}
        route = self.routes.get((response_format.get("json_schema") or {}).get("name"))
        with self._lock:
            if route is not None:
                self.routed.append(body)
                return _Script(content=route(body))
            self.requests.append(body)
            self.headers.append(headers)
            kind = response_format.get("type")
            if kind in self.refused_formats:
                message = f"response_format type {kind!r} is not supported"
                return _Script(status=400, error_message=message)
            if self._queue:
                return self._queue.popleft()
            fallback = self.fallbacks.get((response_format.get("json_schema") or {}).get("name"))
            if fallback is not None:
                return _Script(content=fallback(body))
            if self.fail_ratio and self._random.random() < self.fail_ratio:
                self.injected_failures += 1
                return _Script(status=500, error_message="injected failure")
            if self.responder is not None:  # under the lock: answers in request order
                content, usage = self.responder(body)
                return _Script(content=content, usage=usage)
        return _Script(content=self.default_text)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver listens with a backlog of 5: a burst of new connections (two benchmark
    # server processes opening theirs at once) overflowed it, and one was reset.
    request_queue_size = 512
    # Do not wait on closing for threads parked on idle keep-alive connections.
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hung up (timeouts, cut streams); report anything else."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, like a real endpoint
    fake: FakeOpenAI

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean."""

    def _refused_key(self) -> bool:
        required = self.fake.required_key
        if required and self.headers.get("Authorization") != f"Bearer {required}":
            self._send_json(401, _error_body("Incorrect API key provided"))
            return True
        return False

    def do_GET(self) -> None:
        if self._refused_key():
            return
        if self.path.split("?")[0] not in ("/v1/models", "/models") or (
            self.fake.served_models is None
        ):
            self._send_json(404, _error_body(f"no route for {self.path}"))
            return
        data = [
            {"id": name, "object": "model", "owned_by": "fake"} for name in self.fake.served_models
        ]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._refused_key():
            return
        if self.path.split("?")[0] not in CHAT_PATHS:
            self._send_json(404, _error_body(f"no route for {self.path}"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_json(400, _error_body("request body is not JSON"))
            return
        script = self.fake._take(body, {k.lower(): v for k, v in self.headers.items()})
        if self.fake.on_request is not None:
            self.fake.on_request(body)
        if script.delay and self.fake._stopping.wait(script.delay):
            return
        if script.status != 200:
            self._send_json(script.status, _error_body(script.error_message))
        elif body.get("stream"):
            self._send_stream(script, body, raw)
        else:
            self._send_completion(script, body, raw)

    def _send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_completion(self, script: _Script, body: dict, raw: bytes) -> None:
        if self.fake.honours_max_tokens:
            script = _within_max_tokens(script, body)
        message: dict[str, Any] = {"role": "assistant", "content": script.content or None}
        if script.tool_calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in script.tool_calls
            ]
        payload = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(script)}],
            "usage": _usage_body(script, raw),
        }
        if script.cut_after is None:
            self._send_json(200, payload)
            return
        data = json.dumps(payload).encode()
        half = data[: len(data) // 2]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data if script.cut_mode == "drop" else half)))
        self.end_headers()
        self.wfile.write(half)
        if script.cut_mode == "drop":
            self._drop()

    def _send_stream(self, script: _Script, body: dict, raw: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if self.fake.honours_max_tokens:
            script = _within_max_tokens(script, body)
        chunks = _stream_chunks(script, model=body.get("model", ""), raw=raw)
        if not include_usage:
            chunks = [chunk for chunk in chunks if chunk["choices"]]
        if script.cut_after is not None:
            self._send_cut_stream(script, chunks)
            return
        if script.stall_after is not None:
            self._send_stalling_stream(script, chunks)
            return
        # The whole answer in one write: the model is instant, and a write per token
        # would cost the process serving it (a benchmark's own clients) a syscall each.
        events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        events += [b"data: [DONE]\n\n", b""]
        self.wfile.write(b"".join(b"%x\r\n%s\r\n" % (len(data), data) for data in events))
        self.wfile.flush()

    def _send_cut_stream(self, script: _Script, chunks: list[dict]) -> None:
        """Send the role chunk and `cut_after` text deltas, then break the stream."""
        for chunk in chunks[: 1 + (script.cut_after or 0)]:
            self._write_event(json.dumps(chunk))
        if script.cut_mode == "drop":
            self._drop()
            return
        if script.cut_mode == "garbage":
            self._write_event("{this is not json")
        if script.cut_mode == "error":
            error = _error_body("Failed to parse tool call")
            error["error"]["code"] = script.error_status
            self._write_event(json.dumps(error))
        self._write_chunk(b"")

    def _send_stalling_stream(self, script: _Script, chunks: list[dict]) -> None:
        """Send the role chunk and `stall_after` text deltas, pause, then the rest."""
        split = 1 + (script.stall_after or 0)
        for chunk in chunks[:split]:
            self._write_event(json.dumps(chunk))
        if self.fake._stopping.wait(script.stall_seconds):
            return
        for chunk in chunks[split:]:
            self._write_event(json.dumps(chunk))
        self._write_event("[DONE]")
        self._write_chunk(b"")

    def _write_event(self, data: str) -> None:
        self._write_chunk(f"data: {data}\n\n".encode())

    def _write_chunk(self, data: bytes) -> None:
        """Write one HTTP/1.1 chunk; an empty one ends the body."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the connection abruptly, as a crashed or overloaded server would."""
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)


def _stream_chunks(script: _Script, *, model: str, raw: bytes) -> list[dict]:
    """The SSE chunks of one answer: role, text deltas, tool-call fragments, finish, usage.

    The fragments of different tool calls are interleaved (headers first, then argument
    pieces round-robin) so only assembly by index gets them right.
    """

    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in _words(script.content)]
    for index, (call_id, name, _) in enumerate(script.tool_calls):
        header = {"index": index, "id": call_id, "type": "function"}
        header["function"] = {"name": name, "arguments": ""}
        chunks.append(chunk({"tool_calls": [header]}))
    pieces = [_thirds(arguments) for _, _, arguments in script.tool_calls]
    for round_ in range(3):
        for index, parts in enumerate(pieces):
            if parts[round_]:
                fragment = {"index": index, "function": {"arguments": parts[round_]}}
                chunks.append(chunk({"tool_calls": [fragment]}))
    chunks.append(chunk({}, finish_reason=_finish(script)))
    usage_chunk = chunk({})
    usage_chunk["choices"] = []
    usage_chunk["usage"] = _usage_body(script, raw)
    chunks.append(usage_chunk)
    return chunks


def _words(text: str) -> list[str]:
    """Split text into word deltas that join back to exactly the same text."""
    return re.findall(r"\s*\S+|\s+$", text)


def _thirds(text: str) -> tuple[str, str, str]:
    size = -(-len(text) // 3)
    return text[:size], text[size : 2 * size], text[2 * size :]


def _within_max_tokens(script: _Script, body: dict) -> _Script:
    """The answer as a real server sends it under the request's ``max_tokens``: cut after
    that many tokens (a word is a token here), its finish reason ``length``."""
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    words = _words(script.content)
    if not limit or len(words) <= limit:
        return script
    return replace(script, content="".join(words[:limit]), cut_by_max_tokens=True)


def _finish(script: _Script) -> str:
    if script.cut_by_max_tokens:
        return "length"
    return "tool_calls" if script.tool_calls else "stop"


def _usage_body(script: _Script, raw: bytes) -> dict:
    """OpenAI's usage object; `prompt_tokens_details` only when some tokens were cached,
    as some OpenAI-compatible servers omit it entirely."""
    produced = script.content + "".join(args for _, _, args in script.tool_calls)
    usage = script.usage or Usage(
        prompt_tokens=max(1, len(raw) // 4),
        cached_tokens=0,
        completion_tokens=max(1, len(produced) // 4),
    )
    body: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }
    if usage.cached_tokens:
        body["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return body


def _error_body(message: str) -> dict:
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


def _first(operation: dict) -> object:
    """What a consolidation operation names first: the call it belongs to shows it."""
    if operation.get("op") == "merge":
        return (operation.get("ids") or [None])[0]
    return operation.get("old", operation.get("key"))


def shown_records(body: dict) -> list[dict]:
    """The JSON records, one a line, of a request's user message: the entries a
    consolidation call or a subject names call shows (not its headings)."""
    lines = body["messages"][1]["content"].splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


@pytest.fixture
def fake_openai(settings: Any) -> Iterator[FakeOpenAI]:
    """A fresh fake server per test, with Django settings pointed at it.

    Short timeout and no retries keep failure tests fast; the model names are pinned so
    a developer's environment does not leak into assertions.
    """
    server = FakeOpenAI()
    # A consolidation asks the model to name the entries' subjects before it asks for
    # operations; unless a test scripts that call, it names nothing (groups by words only).
    server.routes[SUBJECTS_SCHEMA_NAME] = lambda body: '{"subjects": []}'
    # It asks for operations a group of entries at a time; a test scripts the answers it
    # needs, and the other groups' calls propose nothing.
    server.fallbacks[CONSOLIDATION_SCHEMA_NAME] = lambda body: '{"operations": []}'
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.DRIFTLESS_MODEL = "gpt-4o-mini"
    settings.DRIFTLESS_SUMMARY_MODEL = ""
    settings.LLM_CONNECT_TIMEOUT_SECONDS = 2.0
    settings.LLM_TIMEOUT_SECONDS = 2.0
    settings.LLM_IDLE_TIMEOUT_SECONDS = 2.0
    settings.LLM_MAX_RETRIES = 0
    clear_client_cache()
    try:
        yield server
    finally:
        clear_client_cache()  # first, so no pooled connection keeps a server thread alive
        server.close()
