"""A model behind any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio, the
llama.cpp server), through the official ``openai`` client. Every failure of the client
becomes an :class:`~memory.llm.types.LLMError` with a short readable message: nothing above
the seam sees the ``openai`` package, its exceptions or its response types."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import openai

from memory.lib.text import one_line
from memory.lib.validation import storable_text
from memory.llm.output import ReasoningFilter, parse_json_object
from memory.llm.types import Completion, LLMError, ToolCall, Usage

_ERROR_DETAIL_LIMIT = 200


@dataclass(frozen=True)
class Timeouts:
    """How long a model call may wait, in seconds, at each stage.

    ``connect``: for the TCP (and TLS) connection. ``first_token``: from the request sent to
    the first streamed chunk, the time a CPU model spends reading the prompt (minutes for a
    long one). ``idle``: between two chunks once the answer started; a stream quiet longer
    than this has stalled. There is no total: a long answer that keeps coming is fine.
    """

    connect: float
    first_token: float
    idle: float


# One client per endpoint, shared by every thread (the client is thread-safe).
_clients: dict[tuple[str, str, Timeouts, int], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def client(*, base_url: str, api_key: str, timeouts: Timeouts, max_retries: int) -> openai.OpenAI:
    """Return the shared client for this endpoint, building it on first use.

    One client per endpoint keeps its HTTP connection pool warm across turns; building one
    per call would open a new TCP/TLS connection every time.
    """
    key = (base_url, api_key, timeouts, max_retries)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = openai.OpenAI(
                api_key=api_key,
                base_url=base_url,
                # The read timeout bounds each wait on the socket: the first chunk's, and
                # (far above the idle guard's) each later one.
                timeout=openai.Timeout(timeouts.first_token, connect=timeouts.connect),
                max_retries=max_retries,
            )
            _clients[key] = client
        return client


def clear_client_cache() -> None:
    """Close and forget every cached client and what was learnt about each endpoint (tests
    point each test at a new server)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
        _json_modes.clear()
    for client in clients:
        client.close()


# --- what each endpoint accepts for JSON -------------------------------------------------

JsonMode = Literal["json_schema", "json_object", "prompt"]
# Strongest first: a grammar-constrained schema, JSON mode, then the prompt alone (the
# answer is then found in whatever the model wrote: memory/llm/output.py).
JSON_MODES: tuple[JsonMode, ...] = ("json_schema", "json_object", "prompt")
# The statuses with which an endpoint refuses a response_format it does not support.
_REFUSED_FORMAT = (400, 422)
# The mode each (endpoint, model) was found to accept, learnt on its first refusal.
_json_modes: dict[tuple[str, str], JsonMode] = {}


def _response_format(mode: JsonMode, schema: dict | None, name: str) -> dict | None:
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        }
    if mode == "json_object":
        return {"type": "json_object"}
    return None


# --- the OpenAI-compatible model ---------------------------------------------------------


class OpenAIChatModel:
    """A model behind an OpenAI-compatible HTTP endpoint."""

    offline = False

    def __init__(
        self, *, name: str, client: openai.OpenAI, timeouts: Timeouts, reply_max_tokens: int = 0
    ) -> None:
        self.name = name
        self._client = client
        self._timeouts = timeouts
        self._reply_max_tokens = reply_max_tokens  # chat replies only; 0: the provider's

    def stream(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None = None,
        prompt_cache_key: str | None = None,
        temperature: float | None = None,
    ) -> Iterator[str | Completion]:
        """Stream one chat completion: text deltas, then the assembled Completion."""
        request: dict[str, Any] = {"messages": messages}
        if tools:
            request["tools"] = tools
        if temperature is not None:  # otherwise the provider's own default applies
            request["temperature"] = temperature
        if self._reply_max_tokens:
            request["max_tokens"] = self._reply_max_tokens
        if prompt_cache_key:  # servers that do not know it ignore it
            request["prompt_cache_key"] = prompt_cache_key
        return self._streamed(request)

    def complete_json(
        self,
        *,
        messages: list[dict],
        schema: dict | None = None,
        schema_name: str = "answer",
        max_tokens: int = 0,
    ) -> dict:
        """Ask for a JSON object and return it parsed.

        The strongest ``response_format`` the endpoint accepts is used: ``json_schema``
        (with ``schema``), then ``json_object``, then none (the prompt alone asks). An
        endpoint that refuses one (HTTP 400 or 422) is asked again with the next, and the
        mode that worked is remembered for the endpoint and model, so the refusal costs one
        request once, not one a call.
        """
        endpoint = (str(self._client.base_url), self.name)
        modes = JSON_MODES if schema is not None else JSON_MODES[1:]
        known = _json_modes.get(endpoint)
        if known in modes:
            modes = modes[modes.index(known) :]
        for index, mode in enumerate(modes):
            request: dict[str, Any] = {"messages": messages}
            if max_tokens:
                request["max_tokens"] = max_tokens
            response_format = _response_format(mode, schema, schema_name)
            if response_format is not None:
                request["response_format"] = response_format
            try:
                *_, completion = self._streamed(request)
            except LLMError as err:
                if err.status not in _REFUSED_FORMAT or index == len(modes) - 1:
                    raise
                continue
            if index:
                _json_modes[endpoint] = mode
            assert isinstance(completion, Completion)
            return parse_json_object(completion.content)
        raise AssertionError("the last mode raises or returns")

    def _streamed(self, request: dict[str, Any]) -> Iterator[str | Completion]:
        """One streamed call: its text deltas, then the Completion. The first chunk may take
        ``first_token`` seconds; after it, a stream quiet for ``idle`` seconds is broken."""
        # The body goes to the SDK as it is, in ``extra_body`` (sent untouched, and taking
        # precedence over the empty ``messages`` the SDK requires): it is the API's JSON
        # already, and the SDK's walk of ``messages`` and ``tools`` against its types
        # (``get_type_hints`` on every message's union of TypedDicts, each call) cost a
        # returning user's turn about 1 ms of CPU (issue 43).
        body = {"stream_options": {"include_usage": True}, **request}
        request = {"model": self.name, "stream": True, "messages": [], "extra_body": body}
        assembly = _StreamAssembly(model=self.name)
        guard = _IdleGuard(self._timeouts.idle)
        try:
            # The SDK makes the request and answers its errors; the stream's events are read
            # here as plain JSON (no typed object built per chunk: that was the cost).
            with (
                self._translated_errors(guard),
                self._client.chat.completions.with_streaming_response.create(**request) as raw,
            ):
                response = raw.http_response
                for chunk in _sse_chunks(response):
                    guard.watch(response)
                    delta = assembly.add(chunk)
                    if delta:
                        guard.pause()  # the caller's time with the delta is not the stream's
                        yield delta
                    guard.tick()
        finally:
            guard.stop()
        completion = assembly.completion()
        if assembly.tail:  # text held back while it might have opened a reasoning block
            yield assembly.tail
        yield completion

    @contextmanager
    def _translated_errors(self, guard: _IdleGuard) -> Iterator[None]:
        """Turn every client-side failure into an LLMError with a short, clear message."""
        try:
            yield
        except openai.APITimeoutError as err:
            if guard.fired:  # the guard could not wake the read: it timed out instead
                raise LLMError(self._stalled()) from err
            raise LLMError(
                f"model endpoint timed out after {self._timeouts.first_token:g}s "
                "without starting its answer"
            ) from err
        except openai.APIStatusError as err:
            detail = _error_detail(err.body)
            raise LLMError(
                f"model endpoint returned HTTP {err.status_code}: {detail}", status=err.status_code
            ) from err
        except openai.APIConnectionError as err:
            if guard.fired:
                raise LLMError(self._stalled()) from err
            cause = err.__cause__ or err.message
            raise LLMError(
                f"connection to model endpoint at {self._client.base_url} failed: "
                f"{one_line(str(cause), _ERROR_DETAIL_LIMIT)}"
            ) from err
        except openai.OpenAIError as err:
            # An error event inside a stream: the status it names, when it names one.
            body = getattr(err, "body", None)
            code = body.get("code") if isinstance(body, dict) else None
            raise LLMError(
                f"model endpoint error: {one_line(str(err), _ERROR_DETAIL_LIMIT)}",
                status=code if type(code) is int else None,
            ) from err
        except ValueError as err:  # a stream chunk that is not JSON
            raise LLMError(f"model endpoint sent an unreadable response: {err}") from err

    def _stalled(self) -> str:
        return (
            # No ": " in it: the user reads it whole (turn.model_failure keeps what is before one).
            f"model stream stalled (nothing arrived for {self._timeouts.idle:g}s "
            "after the answer started)"
        )


class _IdleGuard:
    """Breaks a stream that went quiet after it started, from a watching thread.

    The HTTP client has one read timeout for every wait on the socket, and the first wait
    (the prompt read) is far longer than any pause mid-answer may be. So the read timeout
    is the first-token one, and once the first chunk arrived this guard shuts the socket
    when no chunk came for ``seconds``: the blocked read returns at once, and the stream's
    error says it stalled.
    """

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._last = time.monotonic()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._paused = False
        self.fired = False

    def watch(self, response: Any) -> None:
        """A chunk arrived: start watching on the first, note the time on every one."""
        self.tick()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, args=(response,), name="model-idle-guard", daemon=True
            )
            self._thread.start()

    def tick(self) -> None:
        """Now is when the stream last moved (and it is watched again after a pause)."""
        self._last = time.monotonic()
        self._paused = False

    def pause(self) -> None:
        self._paused = True

    def stop(self) -> None:
        self._done.set()

    def _run(self, response: Any) -> None:
        while True:
            left = self._seconds if self._paused else self._last + self._seconds - time.monotonic()
            if left <= 0:
                break
            if self._done.wait(left):
                return
        self.fired = True
        _break_connection(response)


def _break_connection(response: Any) -> None:
    """Wake a read blocked on ``response``'s socket: shut the socket down (closing it from
    another thread would not wake the read)."""
    stream = getattr(response, "extensions", {}).get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    try:
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        else:
            response.close()
    except OSError:
        pass  # already closed: the read has returned


def _sse_chunks(response: Any) -> Iterator[dict]:
    """The JSON objects of a server-sent-events stream, until ``[DONE]``; an error event
    raises as the SDK's stream would (openai.APIError with the provider's body)."""
    data: list[str] = []
    for line in _lines(response):
        if line:
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            continue  # event:, id:, retry: and comments carry nothing we read
        if not data:
            continue
        text, data = "\n".join(data), []
        if text.startswith("[DONE]"):
            return
        chunk = json.loads(text)  # ValueError: an unreadable response
        if isinstance(chunk, dict) and chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else None
            if not isinstance(message, str) or not message:
                message = "An error occurred during streaming"
            raise openai.APIError(message=message, request=response.request, body=error)
        if isinstance(chunk, dict):
            yield chunk


def _lines(response: Any) -> Iterator[str]:
    """The stream's lines; a transport failure while reading (a socket the idle guard
    shut, a peer gone) as the SDK's connection error."""
    lines = response.iter_lines()
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except Exception as err:
            raise openai.APIConnectionError(request=response.request) from err
        yield line


class _StreamAssembly:
    """Accumulates streamed chunks into the final Completion.

    Tool calls arrive as fragments keyed by index (id and name first, then the
    arguments in pieces), so they are assembled per index rather than per chunk. The text
    passes the reasoning filter: a leading ``<think>`` block is neither streamed nor kept.
    """

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._content: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._usage: Usage | None = None
        self._finished = False
        self._reasoning = ReasoningFilter()
        self.tail = ""  # what the filter released only at the end

    def add(self, chunk: dict) -> str:
        """Take in one chunk (its JSON) and return its text delta ("" when it carries
        none)."""
        self._model = chunk.get("model") or self._model
        if chunk.get("usage"):
            self._usage = _usage(chunk["usage"])
        text = ""
        for choice in chunk.get("choices") or ():
            self._finished = self._finished or choice.get("finish_reason") is not None
            delta = choice.get("delta")
            if not delta:
                continue
            for fragment in delta.get("tool_calls") or ():
                self._add_tool_call_fragment(fragment)
            content = delta.get("content")
            if content and isinstance(content, str):
                text += self._reasoning.feed(storable_text(content))
        self._content.append(text)
        return text

    def _add_tool_call_fragment(self, fragment: dict) -> None:
        index = fragment.get("index") or 0
        call = self._calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        call["id"] = _text(fragment.get("id")) or call["id"]
        function = fragment.get("function")
        if isinstance(function, dict):
            call["name"] = _text(function.get("name")) or call["name"]
            if function.get("arguments"):
                call["arguments"].append(_text(function["arguments"]))

    def completion(self) -> Completion:
        """Return the assembled answer; a stream that ended without a finish reason was cut."""
        if not self._finished:
            raise LLMError("model endpoint closed the stream before the answer was complete")
        self.tail = self._reasoning.flush()
        self._content.append(self.tail)
        tool_calls = tuple(
            ToolCall(
                id=storable_text(call["id"]) or f"call_{index}",
                name=storable_text(call["name"]),
                arguments=storable_text("".join(call["arguments"])),
            )
            for index, call in sorted(self._calls.items())
        )
        return Completion(
            content="".join(self._content),
            tool_calls=tool_calls,
            usage=self._usage,
            model=self._model,
        )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _usage(usage: dict) -> Usage:
    details = usage.get("prompt_tokens_details")
    cached = (details.get("cached_tokens") if isinstance(details, dict) else None) or 0
    return Usage(
        prompt_tokens=usage.get("prompt_tokens") or 0,
        cached_tokens=cached,
        completion_tokens=usage.get("completion_tokens") or 0,
    )


def _error_detail(body: object) -> str:
    """Pick the provider's own error message out of an error body, if it has one."""
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return one_line(body["message"], _ERROR_DETAIL_LIMIT)
    return one_line(str(body), _ERROR_DETAIL_LIMIT) if body else "no details"


# --- the offline model -------------------------------------------------------------------
