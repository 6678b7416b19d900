"""What a model writes, made usable: its reasoning block removed, its JSON object found.

Real models do not answer the way an API asks. A reasoning model opens with a
``<think>…</think>`` block (or ``<thinking>``, ``<reasoning>``) before its answer; a small
local model asked for JSON wraps it in a Markdown code fence or says a sentence around it.
The rules here are the only ones: every reply, tool-call message, title and summary the seam
returns has passed them.

* A reasoning block is removed only where models put it, at the start of the answer (after
  whitespace), one or more of them; an unclosed one there means the whole answer was
  reasoning. A reply that *talks about* ``<think>`` tags further on keeps them.
* The JSON object of an answer is the whole answer when it is one, otherwise the first
  object found in it (inside a fence or after a sentence alike).
"""

from __future__ import annotations

import json
import re

from memory.lib.errors import InvalidInput
from memory.lib.text import one_line
from memory.lib.validation import check_json_depth, storable_json
from memory.llm.types import LLMError

_QUOTE_LIMIT = 80  # how much of a bad answer is quoted back in an error
# How many opening braces of a chatty answer are tried as the start of its JSON object:
# bounds the work on an answer full of braces.
_JSON_STARTS = 50

_REASONING_TAGS = ("think", "thinking", "reasoning")
_OPENING = re.compile(r"<(" + "|".join(_REASONING_TAGS) + r")>", re.IGNORECASE)


class ReasoningFilter:
    """Removes the leading reasoning blocks of streamed text, as it arrives.

    ``feed`` returns the visible part of each piece (possibly "", while the start of the
    answer is still undecided: inside a block, or a ``<thi`` that may become one); ``flush``
    returns what is left at the end. Joined, they are :func:`strip_reasoning` of the text.
    """

    def __init__(self) -> None:
        self._pending = ""
        self._decided = False

    def feed(self, text: str) -> str:
        if self._decided:
            return text
        self._pending += text
        start = _visible_start(self._pending)
        if start is None:
            return ""
        self._decided = True
        visible, self._pending = self._pending[start:], ""
        return visible

    def flush(self) -> str:
        """The end of the answer: an unclosed leading block was all reasoning."""
        if self._decided:
            return ""
        self._decided = True
        pending, self._pending = self._pending, ""
        if _OPENING.match(pending.lstrip()):
            return ""
        return pending


def strip_reasoning(text: str) -> str:
    """``text`` without its leading reasoning blocks (see the module)."""
    reasoning = ReasoningFilter()
    return reasoning.feed(text) + reasoning.flush()


def _visible_start(text: str) -> int | None:
    """Where the answer starts after its leading reasoning blocks, or None while that is
    undecided (the text so far is whitespace, inside a block, or may open one)."""
    index, skipped = 0, False
    while True:
        rest = text[index:].lstrip()
        at = len(text) - len(rest)
        if not rest:
            return None
        opening = _OPENING.match(text, at)
        if opening is None:
            if _may_open(rest):
                return None
            return at if skipped else index
        closing = re.compile(f"</{opening.group(1)}>", re.IGNORECASE).search(text, opening.end())
        if closing is None:
            return None
        index, skipped = closing.end(), True


def _may_open(text: str) -> bool:
    """True when ``text`` is the beginning of an opening tag (``<``, ``<th``, ``<Think``)."""
    lowered = text.lower()
    return any(
        len(lowered) < len(f"<{tag}>") and f"<{tag}>".startswith(lowered) for tag in _REASONING_TAGS
    )


def parse_json_object(content: str) -> dict:
    """The JSON object of a model's answer, as a dict with storable strings, or LLMError.

    The answer is read after :func:`strip_reasoning`: the whole of it when it is JSON,
    otherwise the first object in it (a fenced block, or an object after a sentence).
    """
    text = strip_reasoning(content).strip()
    try:  # the depth limit people's JSON meets
        check_json_depth(text, field="model answer")
    except InvalidInput as err:
        raise LLMError(err.message) from err
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = _first_object(text)
        if value is None:
            raise LLMError(
                f"model answer is not valid JSON: {one_line(content, _QUOTE_LIMIT)!r}"
            ) from None
    if not isinstance(value, dict):
        raise LLMError(
            f"model answer is JSON but not an object: {one_line(content, _QUOTE_LIMIT)!r}"
        )
    return storable_json(value)


def _first_object(text: str) -> dict | None:
    """The first JSON object embedded in ``text`` (fenced, or in a sentence), or None."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(_JSON_STARTS):
        if start < 0:
            return None
        try:
            value, _end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None
