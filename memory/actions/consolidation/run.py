"""Consolidation: memory that stays true as it grows, and never overrides the user.

One pass over one (agent, user, organization) scope. The model reads the scope's memory
entries that may share a subject, a group a call (memory/actions/consolidation/prompt.py:
by their words, or the subject names the model gave them,
memory/actions/consolidation/subjects.py), each a one-line JSON record (id, day, title,
summary; ``deprecated`` for a reversed one, title only; ``user_curated`` when the user
chose or wrote it), and proposes operations:

* ``merge``: entries about one subject become one. The target (``into``, else the newest)
  takes the merged title and summary; the other entries leave memory (demoted by the
  consolidator, linked to the run);
* ``supersede``: an earlier entry whose decision a later one reversed is deprecated (it
  stays in the block as ``[DEPRECATED] title``, as the specification wants);
* ``fact``: a durable fact a later entry made stale is updated or marked outdated (the
  model is shown the scope's facts too; memory/actions/consolidation/facts.py).

Beside a usable answer, the model-free pass's near-duplicate merges apply too, on the
entries the model's applied operations left alone (recorded ``"by": "rules"``).

The human always wins. An entry the user curated (either manual flag set, or the user's
own title and summary) is never merged away, rewritten, demoted or deprecated: an
operation that would do so is refused and recorded with the reason in the run's
``refused`` list, and the run's other operations still apply. A curated entry may be the
target of a merge (its text is then kept as the user left it) or the successor of a
supersede. A deprecated entry is left as it is (its ``[DEPRECATED]`` line is the trace of
a reversal), so an operation naming one is refused too. A merge whose entries are not
about one subject by text statistics is refused as ``unrelated``
(memory/actions/consolidation/rules.py): model output goes through the same checks as the
user's input. A merge keeps what each of its entries said: when the model's summary keeps
too little of one entry's subject words (small models write one entry's summary, or a
neighbour's, as the merge's), the entries' own summaries are joined instead, as the
model-free pass joins them (recorded ``"summary_by": "rules"``; the proposal keeps the
model's words), and the merge is refused when those do not fit one summary.

Each call's answer is read against what that call showed
(memory/actions/consolidation/answer.py): an operation naming an entry or a fact of
another group's call is refused as not shown (shown all at once, the 1.5B model merged
"Offsite planning" into the budget's entries). An unusable answer changes nothing: a
model failure on every call, or answers none of which has a usable operation. A call that
failed or answered without an ``operations`` list, beside others with usable operations,
is refused as unusable and the others apply; so is an unusable operation (unknown, naming
an id its call did not show, a merge without a title and summary). The run records why.

No model call under a lock. :func:`do_consolidate` reads the entries and a ``basis`` of
every in-memory topic of the scope, calls the model with no lock held, then locks the
scope's topics and confirms the basis is unchanged before applying; when it changed, it
prepares and asks again (``STALE_ATTEMPTS``), and gives up as ``stale`` changing nothing.

Every run is a ``ConsolidationRun`` row: the proposal, what was applied (before and after)
and refused, the touched topics' fields before and after, and the scope's block before and
after. :func:`do_undo_consolidation` puts the touched topics back exactly, so the block is
byte for byte the one before the run, unless one of them changed since (then it refuses,
naming it: undoing would overwrite a later choice).

When it runs: on demand (REST, admin, the ``consolidate_memory`` command), and by itself
after an evaluation (:func:`consolidate_if_due`, called by memory/actions/evaluation.py
once the evaluation let go of the session) when ``CONSOLIDATION_AFTER_PROMOTIONS`` topics
of the scope were promoted since its last run, or one was and the block drops entries for
its budget. With the offline model, the run is the model-free pass of
memory/actions/consolidation/rules.py (near-duplicates merged, nothing superseded). One
run of a scope at a time, however started (a lease): a second is refused (409 over REST)
while one runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.actions.consolidation.answer import (
    CallAnswer,
    Operation,
    parse_call_answers,
)
from memory.actions.consolidation.facts import (
    FactOperation,
    apply_fact_operation,
    fact_lines,
    fact_refusal,
    undo_fact_changes,
)
from memory.actions.consolidation.prompt import (
    CONSOLIDATION_SCHEMA_NAME,
    candidate_groups,
    consolidation_requests,
)
from memory.actions.consolidation.rules import (
    ConsolidationConflict,
    UnusableAnswer,
    dropped_entry,
    entry_text,
    merged_summary,
    offline_answer,
    unrelated_entry,
    unrelated_reason,
)
from memory.actions.consolidation.subjects import (
    named_apart,
    named_apart_reason,
    subject_names,
    unlinked_entry,
    unlinked_reason,
)
from memory.events import publish_on_commit, topic_updated
from memory.lib.errors import Conflict, InvalidInput
from memory.lib.text import one_line
from memory.llm import LLMError, get_chat_model
from memory.models import Agent, ConsolidationRun, MemoryDecision, MemoryState, Session, Topic
from memory.models.facts import AGENT_MAY_CHANGE
from memory.stores import leases
from memory.stores.consolidation import (
    ConsolidationEntry,
    Scope,
    demote_merged,
    deprecate_superseded,
    entry_of,
    is_curated,
    lock_scope_topics,
    lock_topics,
    memory_entries,
    restore_fields,
    rewrite_entry,
    scope_basis,
    scope_block,
    scope_dropping_entries,
    topic_fields,
)
from memory.stores.facts import lock_scope_facts, scope_facts

logger = logging.getLogger(__name__)

# An answer is a few operations: a small model that runs on repeats them for minutes (one
# wrote 3,000 tokens at 9 a second). Cut there, it is not JSON: unusable, nothing changes.
ANSWER_MAX_TOKENS = 2000
STALE_ATTEMPTS = 2
# Why the model was not asked (memory/actions/consolidation/prompt.py, consolidation_requests).
NOTHING_TO_ASK = (
    "nothing it could change: no two entries of one subject (in memory, not all the "
    "user's), nor one with a fact"
)


@dataclass
class Prepared:
    entries: list[ConsolidationEntry]
    basis: tuple
    fact_basis: tuple = ({}, {})  # the scope's facts and provenance when it was asked
    answers: list[CallAnswer] = field(default_factory=list)  # each call's, or the offline pass's
    near_duplicates: dict | None = None  # the model-free pass's answer, beside the model's
    names: dict[int, str] = field(default_factory=dict)  # each entry's subject, by the model
    failed_calls: list[dict] = field(default_factory=list)  # a group's call that failed
    error: str = ""  # every call failed
    nothing: str = ""  # why the model was not asked: nothing to consolidate
    model_name: str = ""
    offline: bool = False  # no model: the model-free pass answered


@dataclass
class _Outcome:
    applied: list[dict] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    snapshot: dict[str, dict] = field(default_factory=dict)


# --- the run -----------------------------------------------------------------------------------


def prepare_consolidation(scope: Scope) -> Prepared:
    """Read the entries and call the model, with no lock held."""
    basis = scope_basis(scope)
    entries = memory_entries(scope)
    data, provenance = scope_facts(**scope.ids())
    prepared = Prepared(entries=entries, basis=basis, fact_basis=(data, provenance))
    if not _worth_asking(entries, data):
        prepared.nothing = "fewer than two promoted entries"
        return prepared
    model = get_chat_model("summary", agent=Agent.objects.filter(pk=scope.agent_id).first())
    prepared.model_name = model.name
    if model.offline:  # the model-free pass: near-duplicates merged, nothing superseded
        known = frozenset(entry.topic_id for entry in entries)
        prepared.answers = [CallAnswer(offline_answer(entries), known=known)]
        prepared.offline = True
        return prepared
    records = fact_lines(data, provenance)
    shown_facts = {key: data[key] for key in records}
    prepared.names = subject_names(model, entries)
    groups = candidate_groups(entries, prepared.names)
    changeable = frozenset(  # the facts the agent or the consolidator set (not the user)
        key for key in records if (provenance.get(key) or {}).get("actor") in AGENT_MAY_CHANGE
    )
    requests = consolidation_requests(groups, shown_facts, records, changeable)
    if not requests:
        prepared.entries = []
        prepared.nothing = NOTHING_TO_ASK
        return prepared
    prepared.entries = [entry for request in requests for entry in request.group]
    prepared.near_duplicates = offline_answer(entries)
    for request in requests:
        known = frozenset(entry.topic_id for entry in request.group)
        try:
            answer = model.complete_json(
                messages=request.messages,
                schema=request.schema,
                schema_name=CONSOLIDATION_SCHEMA_NAME,
                max_tokens=ANSWER_MAX_TOKENS,
            )
        except LLMError as err:  # this group's call: the others' answers still count
            failed = CallAnswer(None, known=known).refusal(f"the model call failed: {err}")
            prepared.failed_calls.append(failed)
            continue
        facts = {key: data[key] for key in request.facts}
        prepared.answers.append(CallAnswer(answer, known=known, facts=facts))
    if not prepared.answers:
        prepared.error = prepared.failed_calls[0]["reason"]
    return prepared


def _promoted(entries: list[ConsolidationEntry]) -> int:
    return sum(not entry.deprecated for entry in entries)


def _worth_asking(entries: list[ConsolidationEntry], facts: dict[str, Any]) -> bool:
    """Two promoted entries (something to merge or supersede), or one and facts it may
    have made stale."""
    return _promoted(entries) >= 2 or (_promoted(entries) == 1 and bool(facts))


def do_consolidate(
    *, agent: Agent, user, requested_by=None, trigger: str = ConsolidationRun.Trigger.USER
) -> ConsolidationRun:
    """Consolidate the (agent, user, agent's organization) scope; the run says what happened.

    One run of a scope at a time (a lease): a second is refused while one runs."""
    scope = Scope(agent.pk, user.pk, agent.organization_id)
    try:
        with leases.lease(f"consolidation:{scope.key}"):
            return _consolidate(scope, agent=agent, user=user, by=requested_by, trigger=trigger)
    except leases.LeaseBusy:
        raise ConsolidationConflict(
            "a consolidation of this memory is running now; try again when it has finished"
        ) from None


def _consolidate(scope: Scope, *, agent: Agent, user, by, trigger: str) -> ConsolidationRun:
    run = ConsolidationRun.objects.create(
        agent=agent,
        user=user,
        organization_id=agent.organization_id,
        requested_by=by,
        trigger=trigger,
    )
    try:
        for attempt in range(STALE_ATTEMPTS):
            prepared = prepare_consolidation(scope)
            if _commit(run, scope, prepared, agent=agent, user=user):
                break
            logger.info("consolidation %s: memory changed during the call (%d)", run.pk, attempt)
        else:
            _finish(run, ConsolidationRun.Status.STALE, "memory kept changing during the call")
    except Exception:  # the transaction rolled back: nothing changed; the run says so
        run.refresh_from_db()
        _finish(run, ConsolidationRun.Status.FAILED, "the run failed; nothing was changed")
        raise
    return run


def _commit(run: ConsolidationRun, scope: Scope, prepared: Prepared, *, agent, user) -> bool:
    """Under the lock: confirm, then apply. False when the scope changed meanwhile."""
    budget = agent.memory_token_budget
    with transaction.atomic():
        topics = lock_scope_topics(scope)
        document = lock_scope_facts(**scope.ids())
        facts_now = (dict(document.data), dict(document.provenance)) if document else ({}, {})
        if scope_basis(scope) != prepared.basis or facts_now != prepared.fact_basis:
            return False
        run.model_name = prepared.model_name
        run.entries_sent = len(prepared.entries)
        if prepared.nothing:
            _finish(run, ConsolidationRun.Status.NOTHING, prepared.nothing)
            return True
        if prepared.error:
            _finish(run, ConsolidationRun.Status.FAILED, prepared.error)
            return True
        run.proposal = [item for call in prepared.answers for item in _proposal(call.answer)]
        try:
            operations, unusable = parse_call_answers(prepared.answers)
        except UnusableAnswer as err:
            _finish(run, ConsolidationRun.Status.UNUSABLE, str(err))
            return True
        run.block_before = scope_block(scope, budget=budget)
        scope_ids = {"agent": agent, "user": user}
        outcome = _apply(run, operations, topics, prepared, document=document, **scope_ids)
        left = _near_duplicates_left(prepared, outcome)
        _apply(run, left, topics, prepared, document=document, outcome=outcome, **scope_ids)
        run.applied, run.snapshot = outcome.applied, outcome.snapshot
        run.refused = prepared.failed_calls + unusable + outcome.refused
        run.result = {key: topic_fields(topics[int(key)]) for key in outcome.snapshot}
        run.block_after = scope_block(scope, budget=budget)
        if outcome.applied:
            _finish(run, ConsolidationRun.Status.APPLIED, "")
        elif outcome.refused:
            _finish(run, ConsolidationRun.Status.NOTHING, "every proposed operation was refused")
        else:
            _finish(run, ConsolidationRun.Status.NOTHING, _no_change(prepared))
        return True


def _no_change(prepared: Prepared) -> str:  # offline, no model was asked
    return OFFLINE_NO_CHANGE if prepared.offline else "the model proposed no change"


OFFLINE_NO_CHANGE = "offline (no model connected): no near-duplicate entries to merge"


def _proposal(answer: object) -> list:
    """What one call proposed, as the model wrote it: its operations, else the answer."""
    operations = answer.get("operations") if isinstance(answer, dict) else None
    return operations if isinstance(operations, list) else [answer]


def _finish(run: ConsolidationRun, status: str, detail: str) -> None:
    run.status, run.detail, run.finished_at = status, detail, timezone.now()
    run.save()


def _near_duplicates_left(prepared: Prepared, outcome: _Outcome) -> list[Operation]:
    """The model-free pass's merges of near-duplicates (memory/actions/consolidation/rules.py)
    among the entries the model's applied operations left alone: what text statistics can
    tell is one subject is merged even when a small model missed it. Only beside a usable
    answer (an unusable one changes nothing), and checked like the model's. Words alone
    take two short entries of small talk sharing "talk" and "night" for one subject: a
    merge of entries the model named as different subjects is refused (recorded in
    ``outcome``), where the two disagree nothing changes."""
    proposed = (prepared.near_duplicates or {}).get("operations", [])
    known = frozenset(topic_id for operation in proposed for topic_id in operation["ids"])
    try:
        operations, _ = parse_call_answers([CallAnswer({"operations": proposed}, known=known)])
    except UnusableAnswer:  # nothing the pass proposed fits the checks: nothing to add
        return []
    touched = {int(key) for key in outcome.snapshot}
    left = []
    for operation in operations:
        if not isinstance(operation, Operation) or touched & set(operation.ids):
            continue
        operation = replace(operation, by_rules=True)
        apart = named_apart(operation.ids, prepared.names)
        if apart is None:
            left.append(operation)
        else:
            reason = named_apart_reason(apart, prepared.names)
            outcome.refused.append({**operation.as_dict(), "reason": reason})
    return left


def _apply(
    run: ConsolidationRun,
    operations: list,
    topics: dict[int, Topic],
    prepared: Prepared,
    *,
    document,
    outcome: _Outcome | None = None,
    **scope,
):
    outcome = outcome or _Outcome()
    gone: set[int] = set()  # left memory earlier in this call
    for operation in operations:
        if isinstance(operation, FactOperation):
            _fact(run, operation, document, outcome, **scope)
            continue
        proposed, operation = operation, _later_supersedes(operation, topics)
        reason = _refusal(operation, topics, gone, names=prepared.names)
        if not reason:
            operation, reason = _summary_keeping_entries(operation, topics)
        if reason:
            outcome.refused.append({**proposed.as_dict(), "reason": reason})
            logger.info("consolidation %s refused %s: %s", run.pk, operation.op, reason)
            continue
        for topic_id in operation.ids:
            outcome.snapshot.setdefault(str(topic_id), topic_fields(topics[topic_id]))
        outcome.applied.append(_do(run, operation, topics, gone))
    return outcome


def _fact(run: ConsolidationRun, operation: FactOperation, document, outcome: _Outcome, **scope):
    """A fact op: applied as the consolidator, or refused with the reason (a fact the user
    set; a limit of the facts document)."""
    reason = fact_refusal(operation, document)
    if not reason:
        try:
            outcome.applied.append(apply_fact_operation(run, operation, document, **scope))
            return
        except (InvalidInput, Conflict) as err:
            reason = err.message
    outcome.refused.append({**operation.as_dict(), "reason": reason})
    logger.info("consolidation %s refused a fact op: %s", run.pk, reason)


def _age(topic: Topic) -> tuple[float, int]:
    """Where the topic stands in the block's order (oldest first)."""
    changed_at = topic.memory_changed_at
    return (changed_at.timestamp() if changed_at else float("-inf"), topic.pk)


def _later_supersedes(operation: Operation, topics: dict[int, Topic]) -> Operation:
    """A supersede names a decision and its reversal; the later of the two is the current
    state, whichever the model wrote first (small models swap them). The run's proposal
    keeps what the model wrote."""
    if operation.op != "supersede":
        return operation
    old, new = operation.ids
    if _age(topics[new]) < _age(topics[old]):
        return Operation("supersede", (new, old))
    return operation


def _summary_keeping_entries(
    operation: Operation, topics: dict[int, Topic]
) -> tuple[Operation, str]:
    """A model's merge whose summary keeps too little of what one of its entries said
    (``KEPT_TERMS_SHARE`` of memory/actions/consolidation/rules.py) takes the entries' own
    summaries instead, joined as the model-free pass joins them (the newest's, then what the
    older ones add, behind their days), and the newest's title: the model chose what is one
    subject, the entries keep what was said. Refused (the reason) when those do not fit one
    summary. A curated target keeps its own text whatever the summary."""
    if operation.op != "merge" or operation.by_rules:
        return operation, ""
    if is_curated(topics[_target(operation, topics)]):
        return operation, ""
    texts = {i: entry_text(topics[i].title, topics[i].summary) for i in operation.ids}
    dropped = dropped_entry(entry_text(operation.title, operation.summary), texts)
    if dropped is None:
        return operation, ""
    members = [entry_of(topics[i]) for i in sorted(operation.ids, key=lambda i: _age(topics[i]))]
    summary = merged_summary(members)
    if summary is None:
        return operation, (
            f"the merged summary drops what entry #{dropped} said, and the entries' own "
            "summaries do not fit one"
        )
    joined = replace(operation, title=members[-1].title, summary=summary, summary_by_rules=True)
    return joined, ""


def _target(operation: Operation, topics: dict[int, Topic]) -> int:
    if operation.into is not None:
        return operation.into
    return max(operation.ids, key=lambda i: _age(topics[i]))


def _refusal(
    operation: Operation, topics: dict[int, Topic], gone: set[int], *, names: dict[int, str]
) -> str:
    """Why this operation may not be applied ("" when it may); ``names``, the model's
    subject names of the entries."""
    for topic_id in operation.ids:
        if topic_id in gone:
            return f"entry #{topic_id} was already merged or superseded in this run"
    if operation.op == "supersede":
        old = topics[operation.ids[0]]
        if is_curated(old):
            return f"entry #{old.pk} was curated by the user: the consolidator may not change it"
    else:
        target = _target(operation, topics)
        curated = [i for i in operation.ids if i != target and is_curated(topics[i])]
        if curated:
            names = ", ".join(f"#{i}" for i in curated)
            return f"entry {names} was curated by the user: the consolidator may not merge it away"
    # A merge, and a supersede too, says its entries are about one subject: checked.
    texts = {i: entry_text(topics[i].title, topics[i].summary) for i in operation.ids}
    unrelated = unrelated_entry(texts)
    if unrelated is not None:
        return unrelated_reason(*unrelated)
    unlinked = unlinked_entry(texts, names) if operation.op == "merge" else None
    if unlinked is not None:
        return unlinked_reason(unlinked)
    deprecated = [i for i in operation.ids if topics[i].deprecated]
    if deprecated:
        names = ", ".join(f"#{i}" for i in deprecated)
        return f"entry {names} is deprecated: a reversed decision is left as it is"
    return ""


def _do(run: ConsolidationRun, operation: Operation, topics: dict[int, Topic], gone: set[int]):
    before = {str(i): topic_fields(topics[i]) for i in operation.ids}
    if operation.op == "supersede":
        old = topics[operation.ids[0]]
        deprecate_superseded(old, run=run)
        gone.add(old.pk)
        record = {**operation.as_dict(), "superseded_by": operation.ids[1]}
    else:
        target = topics[_target(operation, topics)]
        kept_text = is_curated(target)
        if not kept_text:
            rewrite_entry(target, title=operation.title, summary=operation.summary, run=run)
        for topic_id in operation.ids:
            if topic_id != target.pk:
                demote_merged(topics[topic_id], run=run)
                gone.add(topic_id)
        record = {**operation.as_dict(), "into": target.pk, "target_text_kept": kept_text}
    after = {key: topic_fields(topics[int(key)]) for key in before}
    _announce([topics[int(key)] for key in before if before[key] != after[key]])
    return {**record, "before": before, "after": after}


def _announce(topics: list[Topic]) -> None:
    """Tell each changed topic's session (its clients redraw the brain icon and text)."""
    for topic in topics:
        publish_on_commit(topic.session_id, topic_updated(topic, reason="curation"))


# --- by itself, after promotions --------------------------------------------------------------


def consolidation_due(*, agent: Agent, user_id: int) -> bool:
    """Enough was promoted in the scope since its last run (see the module docstring)."""
    threshold = settings.CONSOLIDATION_AFTER_PROMOTIONS
    if threshold <= 0:
        return False
    scope = Scope(agent.pk, user_id, agent.organization_id)
    last = (
        ConsolidationRun.objects.of_scope(**scope.ids())
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    promotions = MemoryDecision.objects.filter(
        topic__session__agent_id=scope.agent_id,
        topic__session__user_id=scope.user_id,
        topic__session__organization_id=scope.organization_id,
        to_state=MemoryState.PROMOTED,
        action=MemoryDecision.Action.STATE,
        consolidation__isnull=True,  # an undo's restores are not new promotions
    )
    if last is not None:
        promotions = promotions.filter(created_at__gt=last)
    count = promotions.count()
    if count >= threshold:
        return True
    return count > 0 and scope_dropping_entries(scope, budget=agent.memory_token_budget)


def consolidate_if_due(*, session_id: int) -> ConsolidationRun | None:
    """After an evaluation: consolidate the session's scope when it is due. Never raises."""
    try:
        session = Session.objects.select_related("agent").get(pk=session_id)
        if not consolidation_due(agent=session.agent, user_id=session.user_id):
            return None
        return do_consolidate(
            agent=session.agent, user=session.user, trigger=ConsolidationRun.Trigger.AUTO
        )
    except ConsolidationConflict:
        return None  # another process is consolidating this scope now
    except Exception:  # best effort: an evaluation never fails for its consolidation
        logger.exception("automatic consolidation after session %s failed", session_id)
        return None


# --- undo --------------------------------------------------------------------------------------


def do_undo_consolidation(*, run: ConsolidationRun, user) -> ConsolidationRun:
    """Put every topic the run changed back as it was; refused when one changed since."""
    with transaction.atomic():
        run = ConsolidationRun.objects.select_for_update().get(pk=run.pk)
        if not run.undoable:
            raise ConsolidationConflict(
                f"consolidation {run.pk} cannot be undone: it is {run.get_status_display().lower()}"
            )
        ids = sorted(int(key) for key in run.snapshot)
        topics = lock_topics(ids)
        for topic_id in ids:
            topic = topics.get(topic_id)
            if topic is None:
                raise ConsolidationConflict(f"entry #{topic_id} was deleted since: cannot undo")
            left = run.result.get(str(topic_id), {})
            now = topic_fields(topic)
            if not left or any(now.get(key) != value for key, value in left.items()):
                raise ConsolidationConflict(
                    f"entry #{topic_id} ({one_line(topic.title, 60)}) changed since this "
                    "consolidation: undoing it would overwrite that change"
                )
        if run.fact_result:  # checked and put back before the topics (a conflict undoes all)
            undo_fact_changes(run, lock_scope_facts(**Scope.of_run(run).ids()))
        for topic_id in ids:
            restore_fields(topics[topic_id], run.snapshot[str(topic_id)], run=run, user=user)
        _announce([topics[topic_id] for topic_id in ids])
        run.status, run.undone_at, run.undone_by = (
            ConsolidationRun.Status.UNDONE,
            timezone.now(),
            user,
        )
        run.save(update_fields=["status", "undone_at", "undone_by"])
    return run
