"""Durable facts: the one key-value document per (user, agent, organization).

Facts are injected into the stable prefix of every turn at full fidelity and never
summarized, so they are kept small and checked on the way in (memory/lib/limits.py): a key is
short single-line visible text, normalized and unlike every other key of the document
(memory/lib/fact_keys.py), a value any JSON value of bounded size, and the document holds
at most ``MAX_FACTS`` facts and ``MAX_FACTS_TOKENS`` tokens as the model reads it. The
organization is always the agent's, so a fact can never leak into another organization's
scope.

Every write names its actor (``FactActor``: the user, the agent, an import, the
consolidator): the document's ``provenance`` says who last set each fact, when and from
which topic, and a ``FactChange`` row keeps the value it replaced (the newest
``MAX_FACT_HISTORY`` per key). Setting a fact to the value it already has changes nothing,
not even its date, so the prompt's bytes stay the same. The agent cannot overwrite or
remove a fact the user set (``FactSetByUser``, said to it as a tool result); the user can
always change anything.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.lib.errors import Conflict, InvalidInput
from memory.lib.fact_keys import (
    lookalike_difference,
    loose_key,
    refused_character,
    skeleton,
)
from memory.lib.limits import MAX_FACT_KEY_CHARS, MAX_FACT_VALUE_CHARS, MAX_FACTS, MAX_FACTS_TOKENS
from memory.lib.text import one_line, record_text
from memory.lib.tokens import estimate_tokens
from memory.lib.validation import check_json_value, check_unicode
from memory.models import FactActor, FactChange, ImportantInfo, Topic
from memory.models.facts import AGENT_MAY_CHANGE, MAX_FACT_HISTORY

_REMOVED = object()  # a change that removes the key


class FactError(InvalidInput):
    """A fact that cannot be stored; the message says why, for the model or the user.

    ``details`` says which limit was met and how much room is left, for the agent's tool.
    """

    def __init__(
        self, message: str, *, field: str = "value", code: str = "invalid", details=None
    ) -> None:
        super().__init__(message, field=field, code=code)
        self.details: dict[str, Any] = details or {}


class FactSetByUser(Conflict):
    """The agent tried to overwrite or remove a fact the user set."""

    code = "fact_set_by_user"

    def __init__(self, key: str, *, provenance: dict[str, Any] | None) -> None:
        if provenance:
            when = str(provenance.get("set_at", ""))[:10]
            who = f"the user set {key!r} themselves" + (f" (on {when})" if when else "")
            if provenance.get("actor") == FactActor.IMPORT:
                who = f"{key!r} came from the user's own import"
        else:
            who = f"{key!r} was stored before facts recorded who set them, so it may be the user's"
        super().__init__(
            f"{who}: the agent cannot overwrite or remove a fact the user set. If it looks "
            f"wrong or outdated, tell the user and let them change it (the Facts tab, or "
            f"/remember {key} = …); you may $set a new key of your own.",
            field="key",
        )
        self.details = {"key": key, "set_by": (provenance or {}).get("actor")}


def read_facts(*, user, agent) -> dict[str, Any]:
    """The scope's facts ({} when none were ever stored)."""
    return read_facts_with_provenance(user=user, agent=agent)[0]


def read_facts_with_provenance(*, user, agent) -> tuple[dict[str, Any], dict[str, dict]]:
    """The scope's facts and, per key, who last set it, when and from which topic."""
    row = (
        ImportantInfo.objects.filter(user=user, agent=agent, organization_id=agent.organization_id)
        .values_list("data", "provenance")
        .first()
    )
    data, provenance = row or ({}, {})
    data = dict(data or {})
    return data, {key: (provenance or {}).get(key) for key in data}


def read_fact(*, user, agent, key: str) -> dict[str, Any]:
    """One fact, found by the key that names it (normalized, or as stored before today's
    key rules), with who last set it and its history, the newest change first (at most
    ``MAX_FACT_HISTORY``). ``found`` is false for a key never set or since removed (the
    history of a removed key remains)."""
    document = ImportantInfo.objects.filter(
        user=user, agent=agent, organization_id=agent.organization_id
    ).first()
    if document is None:
        return {
            "key": key.strip(),
            "found": False,
            "value": None,
            "provenance": None,
            "history": [],
        }
    data = document.data or {}
    stored = find_fact_key(data, key)
    name = stored if stored is not None else _history_key(document, key)
    changes = FactChange.objects.filter(document=document, key=name)[:MAX_FACT_HISTORY]
    return {
        "key": name,
        "found": stored is not None,
        "value": data.get(stored) if stored is not None else None,
        "provenance": (document.provenance or {}).get(stored) if stored is not None else None,
        "history": [change.as_dict() for change in changes],
    }


def render_fact_lines(
    data: dict[str, Any], *, provenance: dict[str, Any] | None = None
) -> list[str]:
    """The facts as the model reads them, one ``- key (set 2026-03-02): value`` record each,
    sorted by key: the day from ``provenance`` when it is known, the key on one line (keys
    stored before today's rules too), a text value's later lines behind the quote mark
    (memory/lib/text.py), so no stored text starts a line of the prompt."""
    lines = []
    for key in sorted(data):
        day = _set_day((provenance or {}).get(key))
        label = one_line(key) + (f" (set {day})" if day else "")
        lines.append(f"- {label}: {record_text(_fact_value(data[key]))}")
    return lines


def _set_day(provenance: object) -> str:
    """The ISO day a fact was last set, from its provenance ("" when unknown)."""
    when = provenance.get("set_at") if isinstance(provenance, dict) else None
    try:
        moment = datetime.fromisoformat(str(when))
    except ValueError:
        return ""
    if timezone.is_naive(moment):
        return moment.date().isoformat()
    return timezone.localdate(moment).isoformat()


def facts_tokens(data: dict[str, Any]) -> int:
    """Approximate tokens of the facts document as the model reads it."""
    return estimate_tokens("\n".join(render_fact_lines(data)))


def check_fact_key(key: object) -> str:
    """The key as stored (normalized: memory/lib/fact_keys.py), or FactError."""
    if not isinstance(key, str) or not key.strip():
        raise FactError("key must be a non-empty string", field="key", code="wrong_type")
    try:
        check_unicode(key, field="key")
    except InvalidInput as err:
        raise FactError(err.message, field="key", code=err.code) from err
    bad = refused_character(key.strip())
    if bad is not None:
        raise FactError(
            f"key must be one line of visible characters; it holds {bad}",
            field="key",
            code="invalid_key",
        )
    key = loose_key(key)
    if not key:
        raise FactError("key must be a non-empty string", field="key", code="wrong_type")
    if len(key) > MAX_FACT_KEY_CHARS:
        raise FactError(
            f"key is longer than {MAX_FACT_KEY_CHARS} characters", field="key", code="too_long"
        )
    return key


def check_fact_value(value: object) -> Any:
    if value is None:
        raise FactError("value is missing; to delete a fact use $unset", code="empty")
    if isinstance(value, str) and not value.strip():
        raise FactError("a fact needs a value; to delete a fact use $unset", code="empty")
    try:
        check_json_value(value, field="value")
        encoded = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except InvalidInput as err:
        raise FactError(err.message, code=err.code) from err
    except (TypeError, ValueError) as err:
        raise FactError(
            "value must be a JSON value (text, number, boolean, list or object)", code="wrong_type"
        ) from err
    if len(encoded) > MAX_FACT_VALUE_CHARS:
        raise FactError(
            f"value is longer than {MAX_FACT_VALUE_CHARS} characters; store the gist, "
            "or keep long working context in notes",
            code="too_long",
            details={"limit": "fact value characters", "max": MAX_FACT_VALUE_CHARS},
        )
    return value


def check_facts_document(data: object, *, before: dict[str, Any] | None = None) -> dict[str, Any]:
    """A whole document (as admin edits it): every key and value checked, no two keys
    alike, within the fact count and the token budget. A key already stored in ``before``
    is kept as it is (keys stored before today's rules keep working)."""
    if not isinstance(data, dict):
        raise FactError("the facts document must be a JSON object", field="facts")
    before = before or {}
    checked: dict[str, Any] = {}
    for key, value in data.items():
        if key in before:
            checked[key] = check_fact_value(value)
    for key, value in data.items():
        if key not in before:
            new_key = check_fact_key(key)
            if new_key in checked:
                raise FactError(f"the key {key!r} appears twice", field="key", code="duplicate_key")
            check_lookalike(checked, new_key)
            checked[new_key] = check_fact_value(value)
    check_facts_limits(checked, before=before)
    return checked


def check_lookalike(data: dict[str, Any], key: str) -> None:
    """Refuse a new key that only looks like one of ``data``'s keys, naming that key."""
    shape = skeleton(key)
    for existing in data:
        if existing != key and skeleton(existing) == shape:
            odd = lookalike_difference(existing, key)
            raise FactError(
                f"the key {key!r} looks the same as the existing key {existing!r}"
                + (f" (it differs only by look-alike characters: {odd})" if odd else "")
                + f"; use {existing!r}, or a key that looks different",
                field="key",
                code="lookalike_key",
            )


def set_fact(
    *, user, agent, key: str, value: Any, actor: str, by=None, topic_id: int | None = None
) -> dict:
    """Create or update one entry as ``actor`` (``by``: who acted, default the scope's
    user for the user and an import); returns the whole document after the change."""
    key = check_fact_key(key)
    value = check_fact_value(value)
    with transaction.atomic():
        document = _locked_document(user=user, agent=agent)
        before = dict(document.data or {})
        stored = find_fact_key(before, key)
        if stored is None:
            check_lookalike(before, key)
            stored = key
        elif _same(before[stored], value):
            return before  # nothing changes, not even its date
        _guard(document, stored, actor)
        after = {**before, stored: value}
        check_facts_limits(after, before=before)
        _apply(document, {stored: value}, actor=actor, by=_by(by, user, actor), topic_id=topic_id)
    return dict(document.data)


def unset_fact(*, user, agent, key: str, actor: str, by=None, topic_id: int | None = None) -> bool:
    """Delete one entry as ``actor``; False when there was none under that key. A key
    stored before today's key rules is found as it was written."""
    if not isinstance(key, str) or not key.strip():
        raise FactError("key must be a non-empty string", field="key", code="wrong_type")
    with transaction.atomic():
        document = (
            ImportantInfo.objects.select_for_update()
            .filter(user=user, agent=agent, organization_id=agent.organization_id)
            .first()
        )
        stored = find_fact_key(document.data or {}, key) if document is not None else None
        if stored is None:
            return False
        _guard(document, stored, actor)
        _apply(
            document, {stored: _REMOVED}, actor=actor, by=_by(by, user, actor), topic_id=topic_id
        )
    return True


def merge_facts(*, user, agent, facts: dict[str, Any], actor: str, by=None) -> int:
    """Set several checked facts at once (an import: keys from ``check_fact_key``), in
    the caller's transaction; returns how many changed. Refused whole (FactError) when a
    key looks like another or the limits would be passed."""
    document = _locked_document(user=user, agent=agent)
    before = dict(document.data or {})
    changes: dict[str, Any] = {}
    for key, value in facts.items():
        stored = find_fact_key(before, key)
        if stored is None:
            check_lookalike({**before, **changes}, key)
            stored = key
        if stored not in before or not _same(before[stored], value):
            changes[stored] = value
    if changes:
        check_facts_limits({**before, **changes}, before=before)
        _apply(document, changes, actor=actor, by=_by(by, user, actor), topic_id=None)
    return len(changes)


def import_facts(*, user, agent, facts: dict[str, Any], as_of=None) -> dict[str, list[str]]:
    """An import's facts (keys from ``check_fact_key``), in the caller's transaction: a
    missing key is added; a key holding another value is changed only when the document
    is newer (``as_of``, its ``exported_at``) than the stored value's last setting, else
    skipped, so an older export never rolls a newer value back. Returns the keys added,
    changed and skipped. Refused whole (FactError) as merge_facts is."""
    document = _locked_document(user=user, agent=agent)
    before = dict(document.data or {})
    provenance = document.provenance or {}
    report: dict[str, list[str]] = {"added": [], "changed": [], "skipped": []}
    changes: dict[str, Any] = {}
    for key, value in facts.items():
        stored = find_fact_key(before, key)
        if stored is None:
            check_lookalike({**before, **changes}, key)
            changes[key] = value
            report["added"].append(key)
        elif not _same(before[stored], value):
            set_at = parse_datetime(str((provenance.get(stored) or {}).get("set_at") or ""))
            if as_of is not None and set_at is not None and set_at < as_of:
                changes[stored] = value
                report["changed"].append(stored)
            else:
                report["skipped"].append(stored)
    if changes:
        check_facts_limits({**before, **changes}, before=before)
        _apply(
            document,
            changes,
            actor=FactActor.IMPORT,
            by=_by(None, user, FactActor.IMPORT),
            topic_id=None,
        )
    return report


def replace_facts(*, document: ImportantInfo, data: dict[str, Any], actor: str, by) -> None:
    """Make ``document`` hold exactly ``data`` (checked by ``check_facts_document``), as
    an admin edit does, recording each key that changed."""
    with transaction.atomic():
        document = ImportantInfo.objects.select_for_update().get(pk=document.pk)
        before = dict(document.data or {})
        changes = {key: value for key, value in data.items() if not _same(before.get(key), value)}
        changes.update({key: _REMOVED for key in before if key not in data})
        if changes:
            _apply(document, changes, actor=actor, by=by, topic_id=None)


# --- a scope's facts as consolidation reads, changes and undoes them ------------------------


def lock_scope_facts(*, user_id: int, agent_id: int, organization_id: int) -> ImportantInfo | None:
    """The scope's facts document, locked until the transaction ends (None: never stored)."""
    return (
        ImportantInfo.objects.select_for_update()
        .filter(user_id=user_id, agent_id=agent_id, organization_id=organization_id)
        .first()
    )


def scope_facts(
    *, user_id: int, agent_id: int, organization_id: int
) -> tuple[dict[str, Any], dict[str, dict]]:
    """The scope's facts and their provenance, read without a lock."""
    row = (
        ImportantInfo.objects.filter(
            user_id=user_id, agent_id=agent_id, organization_id=organization_id
        )
        .values_list("data", "provenance")
        .first()
    )
    data, provenance = row or ({}, {})
    return dict(data or {}), dict(provenance or {})


def fact_state(document: ImportantInfo, key: str) -> dict[str, Any]:
    """Everything about one key an undo puts back: its value and provenance (or that it
    was absent) and its history rows, as JSON."""
    data, provenance = document.data or {}, document.provenance or {}
    history = [
        {
            "action": change.action,
            "actor": change.actor,
            "user_id": change.user_id,
            "topic_id": change.topic_id,
            "old_value": change.old_value,
            "new_value": change.new_value,
            "created_at": change.created_at.isoformat(),
        }
        for change in FactChange.objects.filter(document=document, key=key)
    ]
    return {
        "present": key in data,
        "value": data.get(key),
        "provenance": provenance.get(key),
        "history": history,
    }


def fact_now(document: ImportantInfo, key: str) -> dict[str, Any]:
    """One key's value and provenance now (what a later change would alter)."""
    state = fact_state(document, key)
    return {name: state[name] for name in ("present", "value", "provenance")}


def restore_fact_state(document: ImportantInfo, key: str, state: dict[str, Any]) -> None:
    """Put one key back exactly as ``fact_state`` saw it: value, provenance, history."""
    data, provenance = dict(document.data or {}), dict(document.provenance or {})
    data.pop(key, None)
    provenance.pop(key, None)
    if state["present"]:
        data[key] = state["value"]
        if state["provenance"] is not None:
            provenance[key] = state["provenance"]
    document.data, document.provenance = data, provenance
    document.save(update_fields=["data", "provenance", "updated_at"])
    FactChange.objects.filter(document=document, key=key).delete()
    # A topic deleted since is no longer named (as its rows' SET_NULL already did).
    ids = {row["topic_id"] for row in state["history"]} - {None}
    topics = set(Topic.objects.filter(pk__in=ids).values_list("pk", flat=True))
    FactChange.objects.bulk_create(
        FactChange(
            document=document,
            key=key,
            action=row["action"],
            actor=row["actor"],
            user_id=row["user_id"],
            topic_id=row["topic_id"] if row["topic_id"] in topics else None,
            old_value=row["old_value"],
            new_value=row["new_value"],
            created_at=datetime.fromisoformat(row["created_at"]),
        )
        for row in state["history"]
    )


def check_facts_limits(after: dict[str, Any], *, before: dict[str, Any]) -> None:
    """``after`` replacing ``before`` (a set, an import, an admin edit), or FactError.

    Refuse a document past the fact count or the token budget, saying how much room
    is left. A change that shrinks an over-limit document (limits lowered) is let through."""
    if len(after) > MAX_FACTS and len(after) > len(before):
        raise FactError(
            f"there are already {len(before)} facts, the limit is {MAX_FACTS}; "
            "$unset facts that no longer matter first",
            field="facts",
            code="too_many_facts",
            details={"limit": "facts", "max": MAX_FACTS, "used": len(before), "room": 0},
        )
    tokens = facts_tokens(after)
    used = facts_tokens(before)
    if tokens > MAX_FACTS_TOKENS and tokens > used:
        room = max(MAX_FACTS_TOKENS - used, 0)
        raise FactError(
            f"the facts would take about {tokens} tokens, the limit is {MAX_FACTS_TOKENS} "
            f"({used} used, {room} left); shorten the value or $unset facts that no longer "
            "matter",
            field="facts",
            code="facts_over_budget",
            details={"limit": "facts tokens", "max": MAX_FACTS_TOKENS, "used": used, "room": room},
        )


# --- helpers ------------------------------------------------------------------------------


def _guard(document: ImportantInfo, key: str, actor: str) -> None:
    """A machine (the agent, the consolidator) changes only what a machine set."""
    if actor in AGENT_MAY_CHANGE and not document.agent_may_change(key):
        raise FactSetByUser(key, provenance=(document.provenance or {}).get(key))


def _apply(
    document: ImportantInfo, changes: dict[str, Any], *, actor: str, by, topic_id: int | None
) -> None:
    """Write ``changes`` (a value, or ``_REMOVED``) with their provenance and history."""
    data = dict(document.data or {})
    rows = []
    for key, value in changes.items():
        old = data.get(key)
        if value is _REMOVED:
            data.pop(key, None)
            document.forget(key)
        else:
            data[key] = value
            document.record(key, actor=actor, topic_id=topic_id)
        rows.append(
            FactChange(
                document=document,
                key=key,
                action=FactChange.Action.UNSET if value is _REMOVED else FactChange.Action.SET,
                actor=actor,
                user=by,
                topic_id=topic_id,
                old_value=old,
                new_value=None if value is _REMOVED else value,
            )
        )
    document.data = data
    document.save(update_fields=["data", "provenance", "updated_at"])
    FactChange.objects.bulk_create(rows)
    for key in changes:
        stale = FactChange.objects.filter(document=document, key=key).values_list("pk", flat=True)
        FactChange.objects.filter(pk__in=list(stale[MAX_FACT_HISTORY:])).delete()


def find_fact_key(data: dict[str, Any], key: str) -> str | None:
    """The stored key ``key`` names: itself, its normalized form, or a key stored before
    today's rules whose normalized form is the same."""
    key = key.strip()
    if key in data:
        return key
    loose = loose_key(key)
    if loose in data:
        return loose
    return next((stored for stored in data if loose_key(stored) == loose), None)


def _history_key(document: ImportantInfo, key: str) -> str:
    """A removed key's name as its history recorded it."""
    loose = loose_key(key.strip())
    keys = FactChange.objects.filter(document=document).order_by().values_list("key", flat=True)
    return next((stored for stored in keys.distinct() if loose_key(stored) == loose), loose)


def _by(by, user, actor: str):
    if by is None and actor in (FactActor.USER, FactActor.IMPORT):
        return user
    return by


def _same(first: Any, second: Any) -> bool:
    """The same JSON value (``1`` is not ``true``, nor ``1.0``)."""
    return json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def _fact_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _locked_document(*, user, agent) -> ImportantInfo:
    """The scope's document, created on first use, locked until the transaction ends."""
    document, _ = ImportantInfo.objects.select_for_update().get_or_create(
        user=user, agent=agent, organization_id=agent.organization_id
    )
    return document
