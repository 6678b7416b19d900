"""A recording pass-through in front of an OpenAI-compatible endpoint, for bench.real_model.

The product talks to this proxy exactly as it would to the endpoint (streamed answers are
passed on line by line as they arrive); for every chat completion it records what kind of
call it was (reply, tool round, summary, drift, other), the HTTP status, the time to the
first streamed token, the total time, the tokens the endpoint reported and, for calls that
ask for JSON, whether the answer parses. It never changes a request or an answer.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

DRIFT_MARK = "You watch a conversation for a change of subject"
SUMMARY_MARK = "Summarize this conversation"
UPSTREAM_TIMEOUT = 1800.0
HOP_HEADERS = {"transfer-encoding", "content-length", "connection", "keep-alive"}


@dataclass
class Call:
    kind: str
    status: int | str = 0
    ttft: float | None = None  # seconds to the first token (streamed) or to the answer
    seconds: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    json_valid: bool | None = None  # for calls that ask for JSON
    finish_reason: str = ""
    tool_calls: int = 0
    content: str = ""


def call_kind(body: dict) -> str:
    text = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
    if DRIFT_MARK in text:
        return "drift"
    if SUMMARY_MARK in text:
        return "summary"
    messages = body.get("messages") or [{}]
    if messages[-1].get("role") == "tool":
        return "tool round"
    if body.get("tools"):
        return "reply"
    return "reply (no tools)" if body.get("stream") else "other"


def json_answer_valid(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


@dataclass
class _Stream:
    """What a streamed answer said, gathered from its server-sent events."""

    content: list[str] = field(default_factory=list)
    tool_calls: set[int] = field(default_factory=set)
    finish_reason: str = ""
    usage: dict = field(default_factory=dict)
    first_token: float | None = None

    def feed(self, line: bytes, now: float) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if not data or data == b"[DONE]":
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            return
        self.usage = chunk.get("usage") or self.usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content") or delta.get("tool_calls"):
                if self.first_token is None:
                    self.first_token = now
            if delta.get("content"):
                self.content.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                self.tool_calls.add(call.get("index", 0))
            self.finish_reason = choice.get("finish_reason") or self.finish_reason


class RecordingProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream.rstrip("/"))
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.prefix = parts.path  # e.g. /v1
        self.calls: list[Call] = []
        self.bodies: list[dict] = []  # the requests, for benches that replay them
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                proxy.forward(self, None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.forward(self, raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.prefix}"

    def start(self) -> RecordingProxy:
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def forward(self, handler: BaseHTTPRequestHandler, raw: bytes | None) -> None:
        path = handler.path
        if not path.startswith(self.prefix):
            path = self.prefix + path
        body = json.loads(raw) if raw else {}
        call = Call(kind=call_kind(body)) if path.endswith("/chat/completions") else None
        began = time.monotonic()
        upstream = http.client.HTTPConnection(self.host, self.port, timeout=UPSTREAM_TIMEOUT)
        try:
            headers = {"Content-Type": "application/json"} if raw is not None else {}
            upstream.request("POST" if raw is not None else "GET", path, raw, headers)
            answer = upstream.getresponse()
            handler.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_HEADERS:
                    handler.send_header(name, value)
            handler.send_header("Connection", "close")
            if body.get("stream") and answer.status == 200:
                stream = self._pass_stream(handler, answer)
                if call is not None:
                    self._note_stream(call, stream, began)
            else:
                data = answer.read()
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)
                if call is not None:
                    self._note_body(call, data, began)
            if call is not None:
                call.status = answer.status
        except OSError as error:  # the endpoint is down, or the product gave up on us
            if call is not None:
                call.status = "client gave up" if isinstance(error, BrokenPipeError) else "down"
        finally:
            upstream.close()
            handler.close_connection = True
        if call is not None:
            call.seconds = time.monotonic() - began
            if body.get("response_format") or call.kind in ("summary", "drift"):
                call.json_valid = call.status == 200 and json_answer_valid(call.content)
            with self.lock:
                self.calls.append(call)
                self.bodies.append(body)

    def _pass_stream(self, handler, answer) -> _Stream:
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        stream = _Stream()
        while True:
            line = answer.readline()
            if not line:
                break
            stream.feed(line, time.monotonic())
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
        return stream

    @staticmethod
    def _note_stream(call: Call, stream: _Stream, began: float) -> None:
        call.content = "".join(stream.content)
        call.tool_calls = len(stream.tool_calls)
        call.finish_reason = stream.finish_reason
        call.ttft = None if stream.first_token is None else stream.first_token - began
        _note_usage(call, stream.usage)

    @staticmethod
    def _note_body(call: Call, data: bytes, began: float) -> None:
        call.ttft = time.monotonic() - began
        try:
            answer = json.loads(data)
        except ValueError:
            return
        choice = (answer.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        call.content = message.get("content") or ""
        call.tool_calls = len(message.get("tool_calls") or [])
        call.finish_reason = choice.get("finish_reason") or ""
        _note_usage(call, answer.get("usage") or {})


def _note_usage(call: Call, usage: dict) -> None:
    call.prompt_tokens = usage.get("prompt_tokens") or 0
    call.completion_tokens = usage.get("completion_tokens") or 0
    details = usage.get("prompt_tokens_details") or {}
    call.cached_tokens = details.get("cached_tokens") or 0
