"""The one seam between Driftless and a language model.

Everything that talks to a model goes through :func:`get_chat_model`, so tests swap exactly
one thing (the endpoint) and the rest of the code never sees the ``openai`` package, its
exceptions or its response types. Two implementations exist:

* ``OpenAIChatModel`` (memory/llm/openai_model.py): any OpenAI-compatible endpoint
  (OpenAI, Ollama, vLLM, LM Studio, llama.cpp server) through the official ``openai`` client.
* ``OfflineModel`` (memory/llm/offline.py): a deterministic stand-in used when nothing is
  configured, so the application (and its memory tools) works without a key and says
  plainly that it is offline.
"""

from __future__ import annotations

from typing import Literal

from django.conf import settings

from memory.llm.offline import DEFAULT_MODEL, OfflineModel
from memory.llm.openai_model import OpenAIChatModel, Timeouts, clear_client_cache, client
from memory.llm.output import parse_json_object, strip_reasoning
from memory.llm.types import ChatModel, Completion, LLMError, ToolCall, Usage

__all__ = [
    "ChatModel",
    "Completion",
    "LLMError",
    "OfflineModel",
    "OpenAIChatModel",
    "ToolCall",
    "Usage",
    "clear_client_cache",
    "context_input_tokens",
    "fit_to_context",
    "get_chat_model",
    "parse_json_object",
    "strip_reasoning",
]

# What share of the model's context one request's input may fill: the rest is room for the
# answer and for the error of the token estimate (memory/lib/tokens.py counts four
# characters a token; a real tokenizer counts more on code and non-Latin text).
CONTEXT_INPUT_SHARE = 3 / 4

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local servers (Ollama, vLLM, ...) ignore the key, but the client refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"


def context_input_tokens() -> int:
    """How many (approximate) tokens one request's input may hold: the share of the
    model's context (``DRIFTLESS_MODEL_CONTEXT``) every request is sized to, so none is
    sent only to fail on the context."""
    return int(settings.DRIFTLESS_MODEL_CONTEXT * CONTEXT_INPUT_SHARE)


def fit_to_context(budget: int) -> int:
    """``budget`` (approximate tokens of a request's input), or less when the model's
    context leaves less room."""
    return min(budget, context_input_tokens())


def get_chat_model(
    purpose: Literal["chat", "summary"] = "chat", *, model_name: str | None = None
) -> ChatModel:
    """Return the model for `purpose`, read from settings on every call.

    Reading settings each time (the client itself is cached) lets tests and operators
    change the endpoint without restarting anything. `model_name` (an agent's own model)
    replaces DRIFTLESS_MODEL on the same endpoint; blank or None keeps the setting.
    """
    api_key, base_url = settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL
    if not (api_key or base_url):
        return OfflineModel()
    chat_model = model_name or settings.DRIFTLESS_MODEL or DEFAULT_MODEL
    name = chat_model
    if purpose == "summary":
        name = settings.DRIFTLESS_SUMMARY_MODEL or chat_model
    timeouts = Timeouts(
        connect=settings.LLM_CONNECT_TIMEOUT_SECONDS,
        first_token=settings.LLM_TIMEOUT_SECONDS,
        idle=settings.LLM_IDLE_TIMEOUT_SECONDS,
    )
    endpoint = client(
        base_url=base_url or DEFAULT_BASE_URL,
        api_key=api_key or PLACEHOLDER_API_KEY,
        timeouts=timeouts,
        max_retries=settings.LLM_MAX_RETRIES,
    )
    return OpenAIChatModel(
        name=name,
        client=endpoint,
        timeouts=timeouts,
        reply_max_tokens=settings.LLM_REPLY_MAX_TOKENS,
    )
