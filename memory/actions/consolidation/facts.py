"""Consolidation's ``fact`` operation: a durable fact a later entry made stale.

The consolidation call also shows the model the scope's facts, one JSON record a line
(key, value, who set it and the day), and it may propose
``{"op": "fact", "key": ..., "value": "..."}`` (the fact takes the value a later entry
says) or ``{"op": "fact", "key": ..., "outdated": true}`` (no entry says what replaced it:
the fact leaves the document the agent reads; its history keeps the value). A fact op on a
key the model was not shown, with neither or both of a value and ``outdated``, or with a
value a fact may not hold (too long, not JSON text...) makes the answer unusable: nothing
changes, as for an unknown entry id.

The human always wins here too: the consolidator changes only a fact the agent or the
consolidator set. One the user set (themselves, or by importing their export), or one
stored before facts recorded who set them, is never changed: the operation is refused and
recorded with the reason, and the rest of the proposal applies.

Every change goes through memory/stores/facts.py as the ``consolidator`` actor (its
provenance and history say so). The run keeps each changed key's state before (value,
provenance, history) and after, so an undo puts the fact back exactly, unless it changed
since.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memory.actions.consolidation.rules import ConsolidationConflict, UnusableAnswer
from memory.lib.errors import InvalidInput
from memory.lib.text import one_line
from memory.lib.tokens import estimate_tokens
from memory.models import ConsolidationRun, FactActor, ImportantInfo
from memory.models.facts import AGENT_MAY_CHANGE
from memory.stores.facts import (
    check_fact_value,
    fact_now,
    fact_state,
    find_fact_key,
    restore_fact_state,
    set_fact,
    unset_fact,
)

# What the model is shown of the facts: each value clipped, at most this many tokens.
FACT_VALUE_CHARS = 300
FACTS_TOKEN_BUDGET = 1000


@dataclass(frozen=True)
class FactOperation:
    key: str  # as stored
    value: Any = None  # the new value; None when outdated
    outdated: bool = False
    op: str = "fact"

    def as_dict(self) -> dict[str, Any]:
        if self.outdated:
            return {"op": "fact", "key": self.key, "outdated": True}
        return {"op": "fact", "key": self.key, "value": self.value}


def fact_lines(data: dict[str, Any], provenance: dict[str, dict]) -> dict[str, str]:
    """The facts as the model reads them, per stored key one JSON record (a line), the
    newest set first while they fit ``FACTS_TOKEN_BUDGET`` (a key not shown cannot be
    changed)."""
    lines: dict[str, str] = {}
    room = FACTS_TOKEN_BUDGET
    for key in sorted(data, key=lambda k: _set_at(provenance.get(k)), reverse=True):
        entry = provenance.get(key) or {}
        value = data[key] if isinstance(data[key], str) else json.dumps(data[key])
        record = {
            "fact": one_line(key),
            "value": one_line(value, FACT_VALUE_CHARS, at_word=True),
            "set_by": entry.get("actor") or "unknown",
            "day": _set_at(entry)[:10],
        }
        line = json.dumps(record, ensure_ascii=False)
        room -= estimate_tokens(line) + 1
        if room < 0:
            break
        lines[key] = line
    return lines


def _set_at(entry: object) -> str:
    return str(entry.get("set_at") or "") if isinstance(entry, dict) else ""


def parse_fact_operation(item: dict, *, facts: dict[str, Any], where: str) -> FactOperation:
    """A fact op of the answer, on a key the model was shown, or UnusableAnswer."""
    key = item.get("key")
    stored = find_fact_key(facts, key) if isinstance(key, str) and key.strip() else None
    if stored is None:
        shown = one_line(repr(key), 40)
        raise UnusableAnswer(f"{where} names a fact that was not shown: {shown}")
    outdated, value = item.get("outdated"), item.get("value")
    if outdated not in (None, True, False):
        raise UnusableAnswer(f'{where}: "outdated" must be true or false')
    if outdated is True:
        if value not in (None, ""):
            raise UnusableAnswer(f"{where}: a fact is either updated or outdated, not both")
        return FactOperation(stored, outdated=True)
    try:
        value = check_fact_value(value)
    except InvalidInput as err:
        raise UnusableAnswer(f"{where}: fact {one_line(stored, 60)!r}: {err.message}") from err
    return FactOperation(stored, value=value)


def fact_refusal(operation: FactOperation, document: ImportantInfo | None) -> str:
    """Why the consolidator may not change this fact ("" when it may)."""
    if document is None or operation.key not in (document.data or {}):
        return f"fact {operation.key!r} is no longer set (removed earlier in this run)"
    actor = document.set_by(operation.key)
    if actor not in AGENT_MAY_CHANGE:
        who = {FactActor.USER: "the user", FactActor.IMPORT: "the user's import"}.get(
            actor, "someone before facts recorded who set them (it may be the user)"
        )
        return f"fact {operation.key!r} was set by {who}: the consolidator may not change it"
    if not operation.outdated and _same(document.data[operation.key], operation.value):
        return f"fact {operation.key!r} already has that value"
    return ""


def _same(first: Any, second: Any) -> bool:
    return json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def apply_fact_operation(
    run: ConsolidationRun, operation: FactOperation, document: ImportantInfo, *, agent, user
) -> dict:
    """Update or remove the fact as the consolidator; the run keeps it before and after.
    A limit of the facts document (memory/stores/facts.py) raises InvalidInput."""
    state = fact_state(document, operation.key)
    if operation.outdated:
        unset_fact(user=user, agent=agent, key=operation.key, actor=FactActor.CONSOLIDATOR)
    else:
        set_fact(
            user=user,
            agent=agent,
            key=operation.key,
            value=operation.value,
            actor=FactActor.CONSOLIDATOR,
        )
    document.refresh_from_db()
    after = fact_now(document, operation.key)
    run.fact_snapshot.setdefault(operation.key, state)  # as it was before the run
    run.fact_result[operation.key] = after
    before = {name: state[name] for name in after}
    return {**operation.as_dict(), "before": before, "after": after}


def undo_fact_changes(run: ConsolidationRun, document: ImportantInfo | None) -> None:
    """Put back every fact the run changed, exactly; Conflict when one changed since."""
    for key, left in run.fact_result.items():
        if document is None or fact_now(document, key) != left:
            raise ConsolidationConflict(
                f"fact {one_line(key, 60)!r} changed since this consolidation: undoing it "
                "would overwrite that change"
            )
    for key, state in run.fact_snapshot.items():
        restore_fact_state(document, key, state)
