"""Why an entry is in memory: where it came from and what consolidation did to it.

The memory panel answers "why do you remember this?" for every entry: who last put it in
(or out of) memory and when (its newest ``MemoryDecision``), which topics a consolidation
merged into it, and, for a deprecated entry, the entry that superseded it. Both come from
the scope's applied ``ConsolidationRun`` rows (an undone run no longer counts), read in
one query; the run list shows what each run did, topic by topic.

Every topic these functions name is looked up within the scope it belongs to: a run's
records are the scope's own, but an id that is not a topic of the scope (one deleted
since) is answered without a session or a title of anyone else's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from memory.events import timestamp
from memory.lib.text import shown_topic_title
from memory.models import ConsolidationRun, MemoryDecision, Topic
from memory.stores.consolidation import Scope
from memory.stores.persistent import MemoryEntry

# How many of the scope's newest applied runs the entries' history is read from.
RUNS_READ = 100


@dataclass(frozen=True)
class TopicRef:
    """A topic as a link shows it; ``session_id`` is None for one deleted since."""

    topic_id: int
    session_id: int | None
    title: str


@dataclass
class EntrySource:
    """What the panel says under one entry."""

    decided_by: str | None = None  # the actor of its newest state decision
    decided_at: str | None = None
    consolidation: int | None = None  # the newest applied run that changed it
    merged_from: list[TopicRef] = field(default_factory=list)  # itself included
    superseded_by: TopicRef | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def topic_refs(scope: Scope, ids: Iterable[int]) -> dict[int, TopicRef]:
    """The scope's topics among ``ids``; any other id is left out."""
    rows = (
        Topic.objects.in_scope(**scope.ids())
        .filter(pk__in=set(ids))
        .values_list("pk", "session_id", "title")
    )
    return {
        pk: TopicRef(pk, session_id, shown_topic_title(title)) for pk, session_id, title in rows
    }


def _ref(refs: dict[int, TopicRef], topic_id: int, titles: dict[str, Any]) -> TopicRef:
    """The topic as it is, or as the run saw it (``titles``: the run's before-fields)."""
    if topic_id in refs:
        return refs[topic_id]
    title = (titles.get(str(topic_id)) or {}).get("title", "")
    return TopicRef(topic_id, None, shown_topic_title(title))


def _applied_runs(scope: Scope) -> list[tuple[int, list]]:
    """The scope's applied runs, oldest first: (id, applied operations)."""
    runs = (
        ConsolidationRun.objects.of_scope(**scope.ids())
        .filter(status=ConsolidationRun.Status.APPLIED)
        .order_by("-created_at", "-pk")
        .values_list("pk", "applied")[:RUNS_READ]
    )
    return list(reversed(runs))


def entry_sources(scope: Scope, entries: Iterable[MemoryEntry]) -> dict[int, EntrySource]:
    """Per entry of the scope: its newest decision and what the applied runs did to it.

    A merge's sources count with what was merged into them before (an entry merged
    twice is "merged from" all of them); "superseded by" stays on an entry only while it
    is deprecated."""
    entries = list(entries)
    sources = {entry.topic_id: EntrySource() for entry in entries}
    decisions = (
        MemoryDecision.objects.filter(topic_id__in=sources, action=MemoryDecision.Action.STATE)
        .order_by("topic_id", "-created_at", "-pk")
        .values_list("topic_id", "actor", "created_at")
    )
    for topic_id, actor, created_at in decisions:
        source = sources[topic_id]
        if source.decided_by is None:
            source.decided_by, source.decided_at = actor, timestamp(created_at)
    runs = _applied_runs(scope)
    named = {i for _, applied in runs for op in applied for i in _ids(op)}
    refs = topic_refs(scope, named)
    merged: dict[int, list[TopicRef]] = {}  # every topic merged into, run after run
    for run_id, applied in runs:
        for op in applied:
            _note(sources, merged, run_id, op, refs)
    for entry in entries:
        sources[entry.topic_id].merged_from = merged.get(entry.topic_id, [])
        if not entry.deprecated:
            sources[entry.topic_id].superseded_by = None
    return sources


def _note(sources, merged: dict[int, list[TopicRef]], run_id: int, op: dict, refs) -> None:
    before = op.get("before", {})
    if op.get("op") == "merge":
        into = op.get("into")
        parts = [merged.pop(i, None) or [_ref(refs, i, before)] for i in op.get("ids", [])]
        merged[into] = list({ref.topic_id: ref for part in parts for ref in part}.values())
        if into in sources:
            sources[into].consolidation = run_id
    elif op.get("op") == "supersede" and op.get("old") in sources:
        source = sources[op["old"]]
        source.consolidation = run_id
        source.superseded_by = _ref(refs, op["new"], before)


def runs_operations(runs: list[ConsolidationRun]) -> dict[int, list[dict[str, Any]]]:
    """Per run: what it applied, then what it refused, each operation with its topics as
    links; the topics are read in one query per scope."""
    by_scope: dict[Scope, list[ConsolidationRun]] = {}
    for run in runs:
        by_scope.setdefault(Scope.of_run(run), []).append(run)
    described: dict[int, list[dict[str, Any]]] = {}
    for scope, scope_runs in by_scope.items():
        ids = {i for run in scope_runs for op in _operations(run) for i in _ids(op)}
        refs = topic_refs(scope, ids)
        for run in scope_runs:
            described[run.pk] = [_describe(op, applied, refs, run) for op, applied in _ops(run)]
    return described


def _ops(run: ConsolidationRun) -> list[tuple[dict, bool]]:
    return [(op, True) for op in run.applied or []] + [(op, False) for op in run.refused or []]


def _operations(run: ConsolidationRun) -> list[dict]:
    return [op for op, _ in _ops(run)]


def _ids(op: dict) -> list[int]:
    """The topic ids an operation record names (validated when the run recorded it); a
    fact operation names none."""
    if op.get("op") == "supersede":
        return [op["old"], op["new"]]
    if op.get("op") == "merge":
        return list(op.get("ids", []))
    return []


def _describe(op: dict, applied: bool, refs, run: ConsolidationRun) -> dict[str, Any]:
    titles = {**(run.snapshot or {}), **op.get("before", {})}
    body: dict[str, Any] = {"op": op.get("op"), "applied": applied, "reason": op.get("reason", "")}
    if op.get("op") == "supersede":
        old, new = (_ref(refs, i, titles) for i in (op["old"], op["new"]))
        return {**body, "old": asdict(old), "new": asdict(new)}
    if op.get("op") == "unusable":  # as the model wrote it: it named nothing we know
        return {**body, "proposed": op.get("proposed", "")}
    if op.get("op") == "fact":
        return {
            **body,
            "key": op.get("key"),
            "value": op.get("value"),
            "outdated": bool(op.get("outdated")),
        }
    into = op.get("into")
    return {
        **body,
        "by": op.get("by", "model"),  # or "rules": the model-free pass's near-duplicates
        "into": asdict(_ref(refs, into, titles)) if into is not None else None,
        "sources": [asdict(_ref(refs, i, titles)) for i in op.get("ids", []) if i != into],
    }
