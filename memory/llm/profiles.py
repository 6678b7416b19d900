"""What the configured model is good at, and so how a turn is shaped for it.

A **profile** says three things about a chat model: its context window, whether it calls
tools reliably, and whether it honours a JSON schema (``response_format``). It is a pure
function of the model's name and one setting (:func:`profile_for`), so every place that
shows it (the context inspector, the chat page's model badge, the admin) shows the same.

Two kinds:

* ``capable`` (the gpt-4o class, and any model this table does not know): every tool is
  offered on every turn, exactly as before profiles existed.
* ``small`` (1-4B instruction models: the local lane's Qwen2.5-Coder-1.5B, SmolLM2,
  Gemma 3 270M-4B, Llama 3.2 1-3B, Phi mini ...): the tools' schemas cost such a model
  more than they give (about 730 prompt tokens and five to six answers in 78 on the memory
  QA bench, docs/measurements.md), so a question turn goes out **lean**: no tool schemas,
  no tools block, memory delivered in context. A turn whose message asks for a memory
  action (memory/text/intent.py) gets the tools. Its persistent-memory block is capped at
  ``SMALL_MEMORY_TOKENS`` (the newest records first): such a model's summaries are long and
  vague, and it answers from one that names something near the question rather than from
  the recalled passage that holds the answer (docs/measurements.md).

``DRIFTLESS_MODEL_PROFILE`` (``auto``, ``small`` or ``capable``) overrides the family's
default for every model of the deployment.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Literal

ProfileKind = Literal["small", "capable"]
PROFILE_CHOICES = ("auto", "small", "capable")
# The most approximate tokens of the persistent-memory block a small model is given.
SMALL_MEMORY_TOKENS = 300


@dataclass(frozen=True)
class ModelProfile:
    model: str
    kind: ProfileKind
    family: str  # which rule of the table chose it ("override" when the setting did)
    context_tokens: int  # the family's context window (DRIFTLESS_MODEL_CONTEXT sizes requests)
    tools_reliable: bool  # offered every tool on every turn
    json_schema: bool  # honours response_format json_schema

    @property
    def lean_questions(self) -> bool:
        """A question turn goes out without tool schemas."""
        return not self.tools_reliable

    def memory_budget(self, agent_budget: int) -> int:
        """The persistent-memory block's budget for this model: the agent's, at most
        ``SMALL_MEMORY_TOKENS`` on a small model."""
        return min(agent_budget, SMALL_MEMORY_TOKENS) if self.kind == "small" else agent_budget

    def as_dict(self) -> dict:
        return {**asdict(self), "lean_questions": self.lean_questions}


# (family, pattern on the lower-cased name, kind, context, json schema), first match wins.
# Small: a parameter count of at most 4B in the name, or a family known to be small.
_SMALL_SIZE = re.compile(r"(?<![\d.])(0?\.\d+|[0-4](?:\.\d+)?)\s*b(?![a-z])")
_FAMILIES: tuple[tuple[str, re.Pattern, ProfileKind, int, bool], ...] = (
    ("smollm", re.compile(r"smollm"), "small", 8192, False),
    ("tinyllama", re.compile(r"tinyllama"), "small", 2048, False),
    ("phi-mini", re.compile(r"phi-?\d.*mini"), "small", 4096, True),
    ("gemma-small", re.compile(r"gemma.*(270m|\b1b|2b|4b)"), "small", 8192, True),
    ("small-by-size", _SMALL_SIZE, "small", 8192, True),
    ("openai", re.compile(r"^(gpt-|o\d|chatgpt)"), "capable", 128000, True),
    ("claude", re.compile(r"claude"), "capable", 200000, True),
)
_DEFAULT = ("unknown", "capable", 8192, True)


def profile_for(model_name: str, override: str = "auto") -> ModelProfile:
    """The profile of ``model_name``: its family's defaults, the kind forced by
    ``override`` (``small`` or ``capable``; ``auto`` or blank keeps the family's)."""
    name = (model_name or "").strip()
    lowered = name.lower()
    family, kind, context, schema = _DEFAULT
    for rule, pattern, rule_kind, rule_context, rule_schema in _FAMILIES:
        if pattern.search(lowered):
            family, kind, context, schema = rule, rule_kind, rule_context, rule_schema
            break
    forced = (override or "auto").strip().lower()
    if forced in ("small", "capable") and forced != kind:
        family, kind = f"{family} (override)", forced
    return ModelProfile(
        model=name,
        kind=kind,  # type: ignore[arg-type]
        family=family,
        context_tokens=context,
        tools_reliable=kind == "capable",
        json_schema=schema,
    )


def configured_profile(model_name: str | None = None) -> ModelProfile:
    """The profile of ``model_name`` (an agent's own model) or of ``DRIFTLESS_MODEL``, with
    ``DRIFTLESS_MODEL_PROFILE`` applied."""
    from django.conf import settings

    name = (model_name or "").strip() or settings.DRIFTLESS_MODEL
    return profile_for(name, settings.DRIFTLESS_MODEL_PROFILE)
