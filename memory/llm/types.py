"""What the model seam speaks: a completion, its tool calls and usage, the one error type,
and the protocol every model implements (memory/llm/__init__.py chooses one)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


class LLMError(Exception):
    """Any failure to get a usable answer from the model, with a short readable message.

    ``status`` is the endpoint's HTTP status when it answered with an error (or named one
    in an error event of a stream), None otherwise: callers decide from it whether asking
    differently may help (a 400 on a ``response_format``, a 500 on a request with tools).
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


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

    def complete_json(
        self,
        *,
        messages: list[dict],
        schema: dict | None = None,
        schema_name: str = "answer",
        max_tokens: int = 0,
    ) -> dict:
        """Ask for one JSON object (conforming to ``schema`` where the endpoint can
        constrain it) and return it parsed. ``max_tokens`` (0: no limit) bounds the answer:
        one cut short is not JSON, so the call fails instead of running on."""
        ...
