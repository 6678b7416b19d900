"""The operator's "test connection": one endpoint and model asked what a turn needs (the
model list, a streamed answer, a tool call offered), and the first thing wrong said in a
sentence: unreachable, key refused (401), unknown model, no streaming, no tools."""

from __future__ import annotations

from dataclasses import dataclass

import openai

PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Answer the connection test.",
        "parameters": {"type": "object", "properties": {}},
    },
}


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    message: str


def _client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=base_url,
        api_key=api_key or "not-needed",
        timeout=openai.Timeout(timeout, connect=min(timeout, 5.0)),
        max_retries=0,
    )


def _refusal(error: openai.APIError, *, base_url: str, key_source: str, what: str) -> str:
    if isinstance(error, openai.APIConnectionError):
        return f"Unreachable: nothing answers at {base_url} ({type(error).__name__})."
    status = getattr(error, "status_code", None)
    if status in (401, 403):
        return f"Key refused ({status}) by {base_url}: check {key_source}."
    if status == 404:
        return f"{what}: the endpoint answered 404 (unknown model or wrong base URL)."
    return f"{what}: the endpoint answered {status or 'an error'}: {str(error)[:160]}"


def probe(*, base_url: str, api_key: str, model: str, key_source: str, timeout: float = 30.0):
    """Ask ``base_url`` what a turn will ask; the first problem found, or what works."""
    client = _client(base_url, api_key, timeout)
    try:
        served = [m.id for m in client.models.list()]
    except openai.NotFoundError:
        served = None  # no model list here (some servers): the chat call tells
    except openai.APIError as error:
        return ProbeResult(
            False,
            _refusal(error, base_url=base_url, key_source=key_source, what="Listing the models"),
        )
    if served is not None and served and model not in served:
        return ProbeResult(
            False, f"Unknown model {model!r}: {base_url} serves {', '.join(served[:8])}."
        )
    messages = [{"role": "user", "content": "Say OK."}]
    try:
        text = ""
        for chunk in client.chat.completions.create(
            model=model, messages=messages, stream=True, max_tokens=8
        ):
            if not getattr(chunk, "choices", None) and not hasattr(chunk, "id"):
                raise TypeError
            for choice in chunk.choices or []:
                text += (choice.delta.content or "") if choice.delta else ""
    except openai.APIError as error:
        return ProbeResult(
            False, _refusal(error, base_url=base_url, key_source=key_source, what="No streaming")
        )
    except (TypeError, AttributeError, ValueError):
        return ProbeResult(False, f"No streaming: {base_url} did not stream an answer.")
    try:
        client.chat.completions.create(
            model=model, messages=messages, tools=[PROBE_TOOL], max_tokens=8
        )
    except openai.APIError as error:
        return ProbeResult(
            False,
            _refusal(
                error,
                base_url=base_url,
                key_source=key_source,
                what=f"No tools: {model} refused a tool list",
            ),
        )
    return ProbeResult(True, f"{model} at {base_url} answers, streams and accepts tools.")
