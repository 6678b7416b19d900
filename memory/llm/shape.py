"""The shape of one turn: does the request carry the tools?

On a **capable** profile (memory/llm/profiles.py) every turn carries every tool, as it
always did. On a **small** one a turn is **lean** unless the user's latest message asks
for a memory action (remember, note, forget: memory/text/intent.py, in any supported
language): no tool schemas in the request, no tools block in the stable prefix, memory
delivered in context (persistent memory, facts, the recalled passages). The user's own
commands (``/remember``, ``/forget``, ``/note``) never reach the model and always work,
and so do the panels.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.llm.profiles import ModelProfile
from memory.text.intent import IntentVerdict, memory_action


@dataclass(frozen=True)
class TurnShape:
    profile: ModelProfile
    tools: bool  # the request carries the tools
    reason: str  # why, in words the context inspector shows
    intent: IntentVerdict | None = None  # the message's, when the profile asked

    def as_dict(self) -> dict:
        return {
            "profile": self.profile.as_dict(),
            "shape": {
                "tools": self.tools,
                "lean": not self.tools,
                "reason": self.reason,
                "intent": self.intent.as_dict() if self.intent else None,
            },
        }


def turn_shape(profile: ModelProfile, latest_message: str) -> TurnShape:
    """Whether a turn answering ``latest_message`` carries the tools on ``profile``."""
    if profile.tools_reliable:
        return TurnShape(profile, True, "this model calls tools reliably: every tool, every turn")
    intent = memory_action(latest_message)
    if intent.asks:
        return TurnShape(
            profile, True, "the message asks for a memory action: tools offered", intent
        )
    return TurnShape(
        profile, False, "a small model and no memory action asked: lean, memory in context", intent
    )
