"""Consolidation: memory that stays true as it grows, and never overrides the user.

The verbs outsiders use, and the few names they need; the rest is inside
(``make lint`` keeps outsiders out of the inner modules):

* ``run.py``       the run itself: prepare, ask, check, apply, undo, and when it is due.
* ``rules.py``     the model-free text rules: subjects, near-duplicates, merged summaries.
* ``prompt.py``    what the model is shown, a group of entries a call.
* ``answer.py``    reading a call's answer against what that call showed.
* ``facts.py``     the durable facts a consolidation may update or mark outdated.
* ``subjects.py``  the subject names call: a few words on what each entry is about.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# The text rules are pure (no Django): bench/consolidation_similarity.py reads their
# thresholds without setting Django up, so they load with the package.
from memory.actions.consolidation.rules import (
    MIN_SHARED_TERMS,
    NEAR_DUPLICATE_THRESHOLD,
    ONE_TERM_THRESHOLD,
    SAME_SUBJECT_THRESHOLD,
    ConsolidationConflict,
    entry_text,
)

if TYPE_CHECKING:
    from memory.actions.consolidation.prompt import (
        CONSOLIDATION_PROMPT,
        CONSOLIDATION_SCHEMA_NAME,
    )
    from memory.actions.consolidation.run import (
        ANSWER_MAX_TOKENS,
        NOTHING_TO_ASK,
        consolidate_if_due,
        consolidation_due,
        do_consolidate,
        do_undo_consolidation,
    )
    from memory.actions.consolidation.subjects import SUBJECTS_SCHEMA_NAME

# The rest needs the models: each name loads its module on first use (PEP 562).
_LOADED_ON_USE = {
    "CONSOLIDATION_PROMPT": "prompt",
    "CONSOLIDATION_SCHEMA_NAME": "prompt",
    "ANSWER_MAX_TOKENS": "run",
    "NOTHING_TO_ASK": "run",
    "consolidate_if_due": "run",
    "consolidation_due": "run",
    "do_consolidate": "run",
    "do_undo_consolidation": "run",
    "SUBJECTS_SCHEMA_NAME": "subjects",
}


def __getattr__(name: str) -> object:
    if name not in _LOADED_ON_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LOADED_ON_USE[name]}"), name)


__all__ = [
    "ANSWER_MAX_TOKENS",
    "CONSOLIDATION_PROMPT",
    "CONSOLIDATION_SCHEMA_NAME",
    "MIN_SHARED_TERMS",
    "NEAR_DUPLICATE_THRESHOLD",
    "NOTHING_TO_ASK",
    "ONE_TERM_THRESHOLD",
    "SAME_SUBJECT_THRESHOLD",
    "SUBJECTS_SCHEMA_NAME",
    "ConsolidationConflict",
    "consolidate_if_due",
    "consolidation_due",
    "do_consolidate",
    "do_undo_consolidation",
    "entry_text",
]
