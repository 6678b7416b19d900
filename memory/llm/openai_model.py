"""A model behind any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio, the
llama.cpp server), through the official ``openai`` client. Every failure of the client
becomes an :class:`~memory.llm.types.LLMError` with a short readable message: nothing above
the seam sees the ``openai`` package, its exceptions or its response types."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai

from memory.lib.text import one_line
from memory.lib.validation import storable_json, storable_text
from memory.llm.types import Completion, LLMError, ToolCall, Usage

_ERROR_DETAIL_LIMIT = 200
_QUOTE_LIMIT = 80  # how much of a bad answer is quoted back in an error

# One client per endpoint, shared by every thread (the client is thread-safe).
_clients: dict[tuple[str, str, float, int], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def client(*, base_url: str, api_key: str, timeout: float, max_retries: int) -> openai.OpenAI:
    """Return the shared client for this endpoint, building it on first use.

    One client per endpoint keeps its HTTP connection pool warm across turns; building one
    per call would open a new TCP/TLS connection every time.
    """
    key = (base_url, api_key, timeout, max_retries)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = openai.OpenAI(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
            )
            _clients[key] = client
        return client


def clear_client_cache() -> None:
    """Close and forget every cached client (tests point each test at a new server)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


# --- the OpenAI-compatible model ---------------------------------------------------------


class OpenAIChatModel:
    """A model behind an OpenAI-compatible HTTP endpoint."""

    offline = False

    def __init__(self, *, name: str, client: openai.OpenAI, timeout: float) -> None:
        self.name = name
        self._client = client
        self._timeout = timeout

    def stream(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None = None,
        prompt_cache_key: str | None = None,
        temperature: float | None = None,
    ) -> Iterator[str | Completion]:
        """Stream one chat completion: text deltas, then the assembled Completion."""
        request: dict[str, Any] = {
            "model": self.name,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = tools
        if temperature is not None:  # otherwise the provider's own default applies
            request["temperature"] = temperature
        if prompt_cache_key:
            # Sent as a raw body field: servers that do not know it ignore it.
            request["extra_body"] = {"prompt_cache_key": prompt_cache_key}
        assembly = _StreamAssembly(model=self.name)
        with (
            self._translated_errors(),
            self._client.chat.completions.create(**request) as chunks,
        ):
            for chunk in chunks:
                delta = assembly.add(chunk)
                if delta:
                    yield delta
        yield assembly.completion()

    def complete_json(self, *, messages: list[dict]) -> dict:
        """Ask for a JSON object (JSON mode) and return it parsed."""
        with self._translated_errors():
            response = self._client.chat.completions.create(
                model=self.name,
                messages=messages,
                response_format={"type": "json_object"},
            )
        if not response.choices:
            raise LLMError("model endpoint returned no choices")
        return parse_json_object(response.choices[0].message.content or "")

    @contextmanager
    def _translated_errors(self) -> Iterator[None]:
        """Turn every client-side failure into an LLMError with a short, clear message."""
        try:
            yield
        except openai.APITimeoutError as err:
            raise LLMError(f"model endpoint timed out after {self._timeout:g}s") from err
        except openai.APIStatusError as err:
            detail = _error_detail(err.body)
            raise LLMError(f"model endpoint returned HTTP {err.status_code}: {detail}") from err
        except openai.APIConnectionError as err:
            cause = err.__cause__ or err.message
            raise LLMError(
                f"connection to model endpoint at {self._client.base_url} failed: "
                f"{one_line(str(cause), _ERROR_DETAIL_LIMIT)}"
            ) from err
        except openai.OpenAIError as err:
            raise LLMError(
                f"model endpoint error: {one_line(str(err), _ERROR_DETAIL_LIMIT)}"
            ) from err
        except ValueError as err:  # a stream chunk that is not JSON
            raise LLMError(f"model endpoint sent an unreadable response: {err}") from err


class _StreamAssembly:
    """Accumulates streamed chunks into the final Completion.

    Tool calls arrive as fragments keyed by index (id and name first, then the
    arguments in pieces), so they are assembled per index rather than per chunk.
    """

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._content: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._usage: Usage | None = None
        self._finished = False

    def add(self, chunk: Any) -> str:
        """Take in one chunk and return its text delta ("" when it carries none)."""
        self._model = chunk.model or self._model
        if chunk.usage is not None:
            self._usage = _usage(chunk.usage)
        text = ""
        for choice in chunk.choices:
            self._finished = self._finished or choice.finish_reason is not None
            delta = choice.delta
            if delta is None:
                continue
            for fragment in delta.tool_calls or ():
                self._add_tool_call_fragment(fragment)
            if delta.content:
                text += storable_text(delta.content)
        self._content.append(text)
        return text

    def _add_tool_call_fragment(self, fragment: Any) -> None:
        call = self._calls.setdefault(fragment.index, {"id": "", "name": "", "arguments": []})
        call["id"] = fragment.id or call["id"]
        if fragment.function is not None:
            call["name"] = fragment.function.name or call["name"]
            if fragment.function.arguments:
                call["arguments"].append(fragment.function.arguments)

    def completion(self) -> Completion:
        """Return the assembled answer; a stream that ended without a finish reason was cut."""
        if not self._finished:
            raise LLMError("model endpoint closed the stream before the answer was complete")
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


def _usage(usage: Any) -> Usage:
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens if details is not None else None) or 0
    return Usage(
        prompt_tokens=usage.prompt_tokens or 0,
        cached_tokens=cached,
        completion_tokens=usage.completion_tokens or 0,
    )


def _error_detail(body: object) -> str:
    """Pick the provider's own error message out of an error body, if it has one."""
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return one_line(body["message"], _ERROR_DETAIL_LIMIT)
    return one_line(str(body), _ERROR_DETAIL_LIMIT) if body else "no details"


_CODE_FENCE = re.compile(r"^```[A-Za-z]*\s*(.*?)\s*```$", re.DOTALL)


def parse_json_object(content: str) -> dict:
    """Parse a JSON-mode answer into a dict, or raise LLMError.

    Small local models sometimes wrap JSON-mode output in a Markdown code fence even
    though the API asked for bare JSON; one surrounding fence is tolerated.
    """
    text = content.strip()
    fenced = _CODE_FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except ValueError as err:
        raise LLMError(
            f"model answer is not valid JSON: {one_line(content, _QUOTE_LIMIT)!r}"
        ) from err
    if not isinstance(value, dict):
        raise LLMError(
            f"model answer is JSON but not an object: {one_line(content, _QUOTE_LIMIT)!r}"
        )
    return storable_json(value)


# --- the offline model -------------------------------------------------------------------
