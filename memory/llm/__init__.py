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

import os
from pathlib import Path
from typing import Any, Literal

from django.conf import settings

from memory.llm.local import local_model_endpoint
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
    "endpoint_key",
    "fit_to_context",
    "get_chat_model",
    "parse_json_object",
    "session_pick",
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


def endpoint_key(endpoint) -> str:
    """The key of an operator-declared endpoint (memory.models.ModelEndpoint): from the
    environment variable it names, else the file it names; blank when neither holds one."""
    if endpoint.api_key_env:
        return os.environ.get(endpoint.api_key_env, "").strip()
    if endpoint.api_key_file:
        try:
            return Path(endpoint.api_key_file).read_text().strip()
        except OSError:
            return ""
    return ""


def _timeouts() -> Timeouts:
    return Timeouts(
        connect=settings.LLM_CONNECT_TIMEOUT_SECONDS,
        first_token=settings.LLM_TIMEOUT_SECONDS,
        idle=settings.LLM_IDLE_TIMEOUT_SECONDS,
    )


def _deployment_endpoint() -> tuple[str, str, str] | None:
    """(base URL, key, default model) of the deployment: OPENAI_* when set, else the local
    model once it is ready (memory/llm/local.py), else None (the offline model)."""
    api_key, base_url = settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL
    if api_key or base_url:
        return base_url or DEFAULT_BASE_URL, api_key, settings.DRIFTLESS_MODEL or DEFAULT_MODEL
    ready = local_model_endpoint()
    if ready is not None:
        return ready.base_url, ready.api_key, ready.model
    return None


def session_pick(session: Any) -> tuple[Any, str] | None:
    """(endpoint, model) the user picked for ``session`` (a memory.models.Session), while
    the operator still lets users pick it (ModelEndpoint.user_models); None otherwise."""
    endpoint = getattr(session, "model_endpoint", None)
    name = (getattr(session, "model_name", "") or "").strip()
    if endpoint is None or not name or name not in endpoint.user_models:
        return None
    return endpoint, name


def get_chat_model(
    purpose: Literal["chat", "summary"] = "chat",
    *,
    model_name: str | None = None,
    agent: Any = None,
    session: Any = None,
) -> ChatModel:
    """Return the model for `purpose`, resolved on every call (the client is cached).

    Resolving each time lets operators switch an agent's endpoint in admin, users pick a
    session's model, and the local model take over once it is ready, with no restart.

    With ``session`` (a memory.models.Session; its agent is then ``agent``) whose user
    picked a model the operator allows (:func:`session_pick`), that model answers the
    chat, and the summary too unless the agent names a summary model of its own. Else,
    with ``agent`` (a memory.models.Agent) whose ``endpoint`` is set, that endpoint
    answers, with the agent's chat or summary model (its endpoint's first model by
    default). Otherwise the deployment's endpoint answers: `model_name` (or the agent's
    own) replaces DRIFTLESS_MODEL on it; blank keeps it.
    """
    if session is not None and agent is None:
        agent = session.agent
    own_summary = (getattr(agent, "summary_model_name", "") or "").strip() if agent else ""
    pick = session_pick(session) if session is not None else None
    if pick is not None and not (purpose == "summary" and own_summary):
        endpoint, name = pick
        return _openai_model(endpoint.base_url, endpoint_key(endpoint), name)
    endpoint = getattr(agent, "endpoint", None) if agent is not None else None
    if agent is not None and not model_name:
        model_name = (agent.model_name or "").strip()
    if endpoint is not None:
        base_url, api_key = endpoint.base_url, endpoint_key(endpoint)
        chat_model = model_name or (endpoint.models or [DEFAULT_MODEL])[0]
    else:
        deployment = _deployment_endpoint()
        if deployment is None:
            return OfflineModel()
        base_url, api_key, default_model = deployment
        chat_model = model_name or default_model
    name = chat_model
    if purpose == "summary":
        name = own_summary or (endpoint is None and settings.DRIFTLESS_SUMMARY_MODEL) or chat_model
    return _openai_model(base_url, api_key, name)


def _openai_model(base_url: str, api_key: str, name: str) -> OpenAIChatModel:
    timeouts = _timeouts()
    return OpenAIChatModel(
        name=name,
        client=client(
            base_url=base_url,
            api_key=api_key or PLACEHOLDER_API_KEY,
            timeouts=timeouts,
            max_retries=settings.LLM_MAX_RETRIES,
        ),
        timeouts=timeouts,
        reply_max_tokens=settings.LLM_REPLY_MAX_TOKENS,
    )
