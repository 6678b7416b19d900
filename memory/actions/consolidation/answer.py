"""Reading a consolidation answer: the model's proposal as operations, each checked on its
own as the user's input would be (memory/actions/consolidation/run.py applies them).

A consolidation asks one call per group, and reads each answer against what its call showed
(:func:`parse_call_answers`): a call sees only its group's entries and the facts of their
subject, so its operations may name only those. An operation is unusable, and refused with
the reason while the rest still apply, when it is none of the known ones, names an entry or
a fact its call did not show, or is a merge without a title and summary; a call is, when
it answered no ``operations`` list. When no call gave a usable operation, the answers are
unusable as a whole: nothing changes. Whether a usable operation may be applied (the
user's curation, one subject) is decided where it is applied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from memory.actions.consolidation.facts import FactOperation, parse_fact_operation
from memory.actions.consolidation.rules import UnusableAnswer
from memory.lib.errors import InvalidInput
from memory.lib.text import one_line
from memory.lib.validation import check_summary, check_topic_title

MAX_OPERATIONS = 200
_OPS = ("merge", "supersede", "fact")


@dataclass(frozen=True)
class Operation:
    op: str  # merge | supersede
    ids: tuple[int, ...]  # merge: the entries; supersede: (old, new)
    into: int | None = None  # merge: the target
    title: str = ""
    summary: str = ""
    by_rules: bool = False  # the model-free pass's near-duplicate merge, not the model's
    summary_by_rules: bool = False  # the model's summary lost an entry: the entries' own, joined

    def as_dict(self) -> dict[str, Any]:
        if self.op == "supersede":
            return {"op": "supersede", "old": self.ids[0], "new": self.ids[1]}
        body: dict[str, Any] = {"op": "merge", "ids": list(self.ids)}
        if self.into is not None:
            body["into"] = self.into
        body |= {"title": self.title, "summary": self.summary}
        if self.summary_by_rules:
            body["summary_by"] = "rules"
        return {**body, "by": "rules"} if self.by_rules else body


@dataclass(frozen=True)
class CallAnswer:
    """One call's answer and what that call showed: the entries (``known``) and the facts
    its operations may name."""

    answer: object
    known: frozenset[int]
    facts: dict[str, Any] = field(default_factory=dict)

    def refusal(self, reason: str) -> dict[str, Any]:
        """The record of this call refused as a whole (it failed, or gave no operations)."""
        ids = ", ".join(f"#{topic_id}" for topic_id in sorted(self.known))
        return {"op": "unusable", "proposed": f"a call on {ids}", "reason": reason}


def parse_call_answers(
    calls: list[CallAnswer],
) -> tuple[list[Operation | FactOperation], list[dict[str, Any]]]:
    """The usable operations of every call's answer, each read against what its own call
    showed, and a refusal record for each unusable operation and each call that gave no
    operations list. UnusableAnswer when not one operation of any call is usable and one
    was not (nothing changes); answers that all propose nothing are usable."""
    usable: list[Operation | FactOperation] = []
    refused: list[dict[str, Any]] = []
    for call in calls:
        try:
            operations, unusable = _parsed(call.answer, known=call.known, facts=call.facts)
        except UnusableAnswer as err:
            refused.append(call.refusal(str(err)))
            continue
        usable += operations
        refused += unusable
    if refused and not usable:
        raise UnusableAnswer("; ".join(refusal["reason"] for refusal in refused[:3]))
    return usable, refused


def _parsed(
    answer: object, *, known: set[int] | frozenset[int], facts: dict[str, Any]
) -> tuple[list[Operation | FactOperation], list[dict[str, Any]]]:
    """Each operation of ``answer`` as usable or a refusal record (checked on its own, as the
    user's input would be); UnusableAnswer only when the answer has no operations list, or
    too many. ``known``: the entry ids its call showed; ``facts``: the facts it showed."""
    if not isinstance(answer, dict) or not isinstance(answer.get("operations"), list):
        raise UnusableAnswer('the answer has no "operations" list')
    raw = answer["operations"]
    if len(raw) > MAX_OPERATIONS:
        raise UnusableAnswer(f"{len(raw)} operations proposed (at most {MAX_OPERATIONS})")
    usable, unusable = [], []
    for index, item in enumerate(raw):
        try:
            usable.append(_operation(item, known=known, facts=facts, index=index))
        except UnusableAnswer as err:
            proposed = one_line(json.dumps(item, ensure_ascii=False, default=str), 300)
            unusable.append({"op": "unusable", "proposed": proposed, "reason": str(err)})
    return usable, unusable


def _operation(
    item: object, *, known: set[int] | frozenset[int], facts: dict[str, Any], index: int
) -> Operation | FactOperation:
    where = f"operation {index + 1}"
    if not isinstance(item, dict) or item.get("op") not in _OPS:
        raise UnusableAnswer(f"{where} is not a merge, a supersede or a fact")
    if item["op"] == "fact":
        return parse_fact_operation(item, facts=facts, where=where)
    if item["op"] == "supersede":
        old, new = _id(item.get("old"), known, where), _id(item.get("new"), known, where)
        if old == new:
            raise UnusableAnswer(f"{where} supersedes entry #{old} by itself")
        return Operation("supersede", (old, new))
    ids = item.get("ids")
    if not isinstance(ids, list):
        raise UnusableAnswer(f"{where}: a merge needs an ids list")
    merged = tuple(dict.fromkeys(_id(value, known, where) for value in ids))
    if len(merged) < 2:
        raise UnusableAnswer(f"{where}: a merge needs two different entries")
    into = item.get("into")
    into = None if into is None else _id(into, known, where)
    if into is not None and into not in merged:
        raise UnusableAnswer(f"{where}: the target #{into} is not one of the merged entries")
    try:
        title = check_topic_title(item.get("title"))
        summary = check_summary(item.get("summary"))
    except InvalidInput as err:
        raise UnusableAnswer(f"{where}: {err.field}: {err.message}") from err
    if not summary:
        raise UnusableAnswer(f"{where}: a merge needs a summary")
    return Operation("merge", merged, into=into, title=title, summary=summary)


def _id(value: object, known: set[int] | frozenset[int], where: str) -> int:
    """An entry id as the model wrote it: 12, "12" or "#12"; one it was shown."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        text = value.strip().removeprefix("#")
        if text.isascii() and text.isdecimal():
            number = int(text)
    if number is None or number not in known:
        shown = one_line(repr(value), 40)
        raise UnusableAnswer(f"{where} names an entry that was not shown: {shown}")
    return number
