"""The one seam between Driftless and a language model.

Everything that talks to a model goes through `get_chat_model()`, so tests swap exactly
one thing (the endpoint) and the rest of the code never sees the `openai` package, its
exceptions or its response types. Two implementations exist:

* `OpenAIChatModel`: any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio,
  llama.cpp server) through the official `openai` client.
* `OfflineModel`: a deterministic stand-in used when nothing is configured, so the
  application (and its memory tools) works without a key and says plainly that it is
  offline.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import openai
from django.conf import settings

from memory.lib.tool_words import describe_tool_result
from memory.lib.validation import storable_json, storable_text

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
# Local servers (Ollama, vLLM, ...) ignore the key, but the client refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"
_ERROR_DETAIL_LIMIT = 200
_QUOTE_LIMIT = 80  # how much of a bad answer is quoted back in an error


class LLMError(Exception):
    """Any failure to get a usable answer from the model, with a short readable message."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON string the model produced; callers validate it


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Completion:
    content: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage | None
    model: str


class ChatModel(Protocol):
    name: str
    offline: bool

    def stream(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None = None,
        prompt_cache_key: str | None = None,
        temperature: float | None = None,
    ) -> Iterator[str | Completion]:
        """Yield text deltas as they arrive, then exactly one Completion last.

        Raises LLMError, possibly after some deltas were yielded.
        """
        ...

    def complete_json(self, *, messages: list[dict]) -> dict:
        """Make one non-streaming JSON-mode call and return the parsed JSON object."""
        ...


def get_chat_model(
    purpose: Literal["chat", "summary"] = "chat", *, model_name: str | None = None
) -> ChatModel:
    """Return the model for `purpose`, read from settings on every call.

    Reading settings each time (the client itself is cached) lets tests and operators
    change the endpoint without restarting anything. `model_name` (an agent's own model)
    replaces DRIFTLESS_MODEL on the same endpoint; blank or None keeps the setting.
    """
    api_key = getattr(settings, "OPENAI_API_KEY", "")
    base_url = getattr(settings, "OPENAI_BASE_URL", "")
    if not (api_key or base_url):
        return OfflineModel()
    chat_model = model_name or getattr(settings, "DRIFTLESS_MODEL", "") or DEFAULT_MODEL
    name = chat_model
    if purpose == "summary":
        name = getattr(settings, "DRIFTLESS_SUMMARY_MODEL", "") or chat_model
    timeout = float(getattr(settings, "LLM_TIMEOUT_SECONDS", 30.0))
    client = _client(
        base_url=base_url or DEFAULT_BASE_URL,
        api_key=api_key or PLACEHOLDER_API_KEY,
        timeout=timeout,
        max_retries=int(getattr(settings, "LLM_MAX_RETRIES", 2)),
    )
    return OpenAIChatModel(name=name, client=client, timeout=timeout)


# --- the client cache --------------------------------------------------------------------

_clients: dict[tuple[str, str, float, int], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def _client(*, base_url: str, api_key: str, timeout: float, max_retries: int) -> openai.OpenAI:
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
                f"{_shorten(str(cause))}"
            ) from err
        except openai.OpenAIError as err:
            raise LLMError(f"model endpoint error: {_shorten(str(err))}") from err
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
        return _shorten(body["message"])
    return _shorten(str(body)) if body else "no details"


def _shorten(text: str, limit: int = _ERROR_DETAIL_LIMIT) -> str:
    """Collapse whitespace and cut long text, so error messages stay one short line."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


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
            f"model answer is not valid JSON: {_shorten(content, _QUOTE_LIMIT)!r}"
        ) from err
    if not isinstance(value, dict):
        raise LLMError(
            f"model answer is JSON but not an object: {_shorten(content, _QUOTE_LIMIT)!r}"
        )
    return storable_json(value)


# --- the offline model -------------------------------------------------------------------

_COMMAND_HELP = (
    "/remember KEY = VALUE stores a durable fact, "
    "/forget KEY removes one, "
    "/note TEXT adds to this topic's notes."
)
_SETUP_HELP = (
    f"To use a real model, set OPENAI_API_KEY (and DRIFTLESS_MODEL, default {DEFAULT_MODEL}), "
    "or set OPENAI_BASE_URL to a local OpenAI-compatible server "
    "(Ollama, vLLM, LM Studio, llama.cpp server) and DRIFTLESS_MODEL to its model name."
)
_USAGE = {
    "/remember": "Usage: /remember KEY = VALUE (for example: /remember favourite colour = teal).",
    "/forget": "Usage: /forget KEY (for example: /forget favourite colour).",
    "/note": "Usage: /note TEXT (for example: /note we chose PostgreSQL for production).",
}


_OFFLINE_NOTICE = "Offline mode: no language model is configured, so I cannot answer that."


class OfflineModel:
    """A deterministic model for when none is configured.

    It answers the memory slash commands with the same tool calls a real model would
    make, so facts and notes can be exercised end to end without a key, and otherwise
    says plainly that it is offline and how to connect a model.
    """

    name = "offline"
    offline = True

    def stream(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None = None,
        prompt_cache_key: str | None = None,
        temperature: float | None = None,
    ) -> Iterator[str | Completion]:
        """Yield the reply word by word (so streaming UIs behave), then the Completion."""
        content, tool_calls = _offline_answer(messages)
        yield from re.findall(r"\S+\s*", content)
        yield Completion(content=content, tool_calls=tool_calls, usage=None, model=self.name)

    def complete_json(self, *, messages: list[dict]) -> dict:
        """Always fail, so callers take their deterministic fallbacks."""
        raise LLMError("offline model: no model configured")


def _offline_answer(messages: list[dict]) -> tuple[str, tuple[ToolCall, ...]]:
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return _tool_result_reply(last, messages), ()
    if last.get("role") == "user":
        command = _slash_command(_text(last), call_id=_offline_call_id(messages))
        if command is not None:
            return command
    return _offline_reply(messages), ()


def _slash_command(text: str, *, call_id: str) -> tuple[str, tuple[ToolCall, ...]] | None:
    """Turn a memory slash command into its tool call; None when the text is not one."""
    word, rest = ([*text.split(maxsplit=1), "", ""])[:2]
    rest = rest.strip()
    if word == "/remember":
        key, equals, value = rest.partition("=")
        if not (equals and key.strip() and value.strip()):
            return _USAGE[word], ()
        arguments = {"operation": "$set", "key": key.strip(), "value": value.strip()}
        return "", (_tool_call(call_id, "important_info", arguments),)
    if word == "/forget":
        if not rest:
            return _USAGE[word], ()
        return "", (_tool_call(call_id, "important_info", {"operation": "$unset", "key": rest}),)
    if word == "/note":
        if not rest:
            return _USAGE[word], ()
        return "", (_tool_call(call_id, "notes", {"operation": "$set", "content": rest}),)
    return None


def _tool_call(call_id: str, name: str, arguments: dict[str, str]) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def _offline_call_id(messages: list[dict]) -> str:
    """A deterministic id that still differs between turns of one conversation."""
    digest = hashlib.sha256(
        json.dumps(messages, sort_keys=True, default=str).encode("utf-8")
    ).hexdigest()
    return f"offline-call-{digest[:12]}"


def _tool_result_reply(result: dict, messages: list[dict]) -> str:
    """What the command did, in a sentence ("Remembered: favourite colour = teal")."""
    function = _tool_function(result.get("tool_call_id"), messages)
    name = function.get("name") or "tool"
    return describe_tool_result(name, function.get("arguments") or "{}", _text(result))


def _tool_function(call_id: object, messages: list[dict]) -> dict:
    """The name and arguments of the call that produced a result, found by its id."""
    for message in reversed(messages):
        for call in message.get("tool_calls") or ():
            if call.get("id") == call_id:
                return call.get("function") or {}
    return {}


def _offline_reply(messages: list[dict]) -> str:
    """A short, honest reply that never repeats the user's words.

    The first reply of a conversation says how to connect a model; later ones only that
    none is connected, so a long conversation with the offline model is still the user's
    words plus one short line per turn (what drift detection and summaries then see).
    """
    if any(m.get("role") == "assistant" and _text(m).strip() for m in messages):
        return f"{_OFFLINE_NOTICE} Memory commands work offline: /remember, /forget, /note."
    return f"{_OFFLINE_NOTICE} {_SETUP_HELP} Memory commands work offline: {_COMMAND_HELP}"


def _text(message: dict) -> str:
    """The text of a message whose content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""
