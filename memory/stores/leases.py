"""Leases: locks in the database that free themselves when their holder dies.

A lease is a row (``memory.models.Lease``) naming a lock, its holder and when it expires.
Acquiring one takes a free or expired row; a holder keeps it while it works because a
single daemon thread per process renews every lease the process holds every
``RENEW_SECONDS``; releasing deletes the row. When a process dies (SIGKILL, a lost
machine) nothing renews its leases, so they expire within ``LEASE_SECONDS`` and the next
caller takes them over, learning that it did (``Held.took_over``).

The turn lock of a session (memory/actions/turn.py) and the evaluation lock of a session
(memory/actions/evaluation.py) are leases. They used to live in the cache alone, so a Redis
outage refused every turn and a dead process kept its session busy for minutes.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from memory.lib.errors import Conflict, Unavailable
from memory.models import Lease
from memory.stores.messages import record_interrupted_turn

logger = logging.getLogger(__name__)

# A dead holder's lease is free again after at most this long.
LEASE_SECONDS = 30
# How often the holder's process renews it: three chances before it could lapse.
RENEW_SECONDS = 10


class LeaseBusy(Exception):
    """Another live holder has the lease."""


@dataclass(frozen=True)
class Held:
    name: str
    token: str
    took_over: bool  # the previous holder died without releasing it


# PostgreSQL takes a lease in one statement: inserted when free, taken over when expired
# (the row's xmax says which), nothing when a live holder has it.
_TAKE_SQL = """
INSERT INTO memory_lease AS l (name, holder, acquired_at, expires_at)
SELECT unnest(%s::varchar[]), %s, %s, %s
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,
    acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= EXCLUDED.acquired_at
RETURNING l.name, l.xmax <> 0
"""


def _one_statement() -> bool:
    return connections["default"].vendor == "postgresql"


def acquire(name: str) -> Held:
    """Take the lease ``name`` or raise :class:`LeaseBusy`; renewed until released."""
    token, now = uuid.uuid4().hex, timezone.now()
    expires = now + timedelta(seconds=LEASE_SECONDS)
    if _one_statement():
        with connections["default"].cursor() as cursor:
            cursor.execute(_TAKE_SQL, [[name], token, now, expires])
            row = cursor.fetchone()
        if row is None:
            raise LeaseBusy(name)
        held = Held(name, token, bool(row[1]))
        _renewer.add(held)
        return held
    with transaction.atomic():
        took_over = (
            Lease.objects.filter(name=name, expires_at__lte=now).update(
                holder=token, acquired_at=now, expires_at=expires
            )
            == 1
        )
        if not took_over:
            try:
                with transaction.atomic():
                    Lease.objects.create(
                        name=name, holder=token, acquired_at=now, expires_at=expires
                    )
            except IntegrityError:
                raise LeaseBusy(name) from None
    held = Held(name, token, took_over)
    _renewer.add(held)
    return held


def release(held: Held) -> None:
    _renewer.discard(held)
    _delete([held.name], held.token)


def _delete(names: list[str], token: str) -> None:
    """Delete the holder's leases ``names``: one statement, no transaction around it (a
    queryset's delete would add BEGIN and COMMIT)."""
    marks = ", ".join(["%s"] * len(names))
    with connections["default"].cursor() as cursor:
        cursor.execute(
            f"DELETE FROM memory_lease WHERE name IN ({marks}) AND holder = %s", [*names, token]
        )


@contextmanager
def lease(name: str) -> Iterator[Held]:
    held = acquire(name)
    try:
        yield held
    finally:
        release(held)


def held_by_this_process(prefix: str = "") -> list[Held]:
    """The leases this process holds now (for a graceful shutdown)."""
    return [held for held in _renewer.snapshot() if held.name.startswith(prefix)]


def expired(prefix: str) -> list[str]:
    """Names of the expired leases under ``prefix``: their holders died."""
    rows = Lease.objects.filter(name__startswith=prefix, expires_at__lte=timezone.now())
    return list(rows.values_list("name", flat=True))


def take_expired(name: str) -> Held | None:
    """Take over ``name`` only if it has expired (to clean up after a dead holder)."""
    try:
        held = acquire(name)
    except LeaseBusy:
        return None
    if held.took_over:
        return held
    release(held)  # it was free, not expired: someone released it meanwhile
    return None


class _Renewer:
    """One daemon thread per process that renews the leases the process holds; it runs
    only while there are some."""

    def __init__(self) -> None:
        self._held: set[Held] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, held: Held) -> None:
        with self._lock:
            self._held.add(held)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lease-renewer", daemon=True)
                self._thread.start()

    def discard(self, held: Held) -> None:
        with self._lock:
            self._held.discard(held)

    def snapshot(self) -> list[Held]:
        with self._lock:
            return list(self._held)

    def _run(self) -> None:
        while True:
            time.sleep(RENEW_SECONDS)
            with self._lock:
                tokens = [held.token for held in self._held]
                if not tokens:
                    self._thread = None
                    return
            try:
                expires = timezone.now() + timedelta(seconds=LEASE_SECONDS)
                Lease.objects.filter(holder__in=tokens).update(expires_at=expires)
            except Exception:  # the database is down: try again next round
                logger.exception("could not renew %d lease(s)", len(tokens))
            finally:
                connections.close_all()  # this thread's connection only


_renewer = _Renewer()


# --- the session lock: one turn (or topic change, or deletion) of a session at a time -------

TURN_LEASE_PREFIX = "turn:"
TURN_IN_PROGRESS_MESSAGE = "a reply is still being generated"
STOPPING_MESSAGE = "the server is restarting; send your message again in a moment"


class TurnBusy(Conflict):
    """Another turn (or a topic change, or a deletion) of this session is running."""

    code = "turn_in_progress"

    def __init__(self) -> None:
        super().__init__(TURN_IN_PROGRESS_MESSAGE)


class ServerStopping(Unavailable):
    """This server process is shutting down and takes no new turn."""

    code = "server_restarting"

    def __init__(self) -> None:
        super().__init__(STOPPING_MESSAGE)


def turn_lease_name(session_id: int) -> str:
    return f"{TURN_LEASE_PREFIX}{session_id}"


# Set when the process is asked to stop (driftless/serve.py): new turns are refused.
_stopping = threading.Event()


@contextmanager
def session_lock(session_id: int) -> Iterator[Held]:
    """The session's turn lease, held while a turn, a topic change or a deletion of the
    session runs, whoever asks (the socket, REST, the pages, admin). It waits up to
    ``TURN_BUSY_WAIT_SECONDS`` for the holder before it: a message sent the moment a reply
    appears (before ``turn.done``) waits instead of being refused; still held after that
    is :class:`TurnBusy`. Taking over the lease of a process that died mid-turn leaves that
    turn's error record first."""
    if _stopping.is_set():
        raise ServerStopping()
    held = _acquire_waiting(turn_lease_name(session_id))
    try:
        if held.took_over:
            record_interrupted_turn(session_id=session_id)
        yield held
    finally:
        release(held)


def _acquire_waiting(name: str) -> Held:
    deadline = time.monotonic() + settings.TURN_BUSY_WAIT_SECONDS
    while True:
        try:
            return acquire(name)
        except LeaseBusy:
            if time.monotonic() >= deadline:
                raise TurnBusy() from None
        time.sleep(0.1)


# --- fair sharing: how many turns one user, and one organization, may run at once --------

USER_SLOT_PREFIX = "turn-slot:user:"
ORGANIZATION_SLOT_PREFIX = "turn-slot:org:"


class TurnCapReached(Conflict):
    """The user (or the organization) already runs as many turns as it may at once:
    refused at once, never queued, so one user's many sessions cannot starve the rest."""

    code = "busy"
    status = 429

    def __init__(self, whose: str, cap: int) -> None:
        super().__init__(
            f"{whose} {cap} replies being generated at once; send this one when one of them is done"
        )


@contextmanager
def turn_slots(*, user_id: int, organization_id: int) -> Iterator[None]:
    """A slot of the user's ``TURN_CAP_PER_USER`` and of the organization's
    ``TURN_CAP_PER_ORGANIZATION``, held while one turn runs (leases, so a dead process's
    slots free themselves). :class:`TurnCapReached` when either has none free. On
    PostgreSQL both are taken in one statement and given back in one."""
    user_cap, org_cap = settings.TURN_CAP_PER_USER, settings.TURN_CAP_PER_ORGANIZATION
    if _one_statement():
        slots = _take_slots(user_id=user_id, organization_id=organization_id)
        try:
            yield
        finally:
            _release_all(slots)
        return
    user_slot = _free_slot(f"{USER_SLOT_PREFIX}{user_id}:", user_cap)
    if user_slot is None:
        raise TurnCapReached("You already have", user_cap)
    try:
        org_slot = _free_slot(f"{ORGANIZATION_SLOT_PREFIX}{organization_id}:", org_cap)
        if org_slot is None:
            raise TurnCapReached("Your organization already has", org_cap)
        try:
            yield
        finally:
            release(org_slot)
    finally:
        release(user_slot)


# Both slots in one statement: a free (or expired) slot of each, picked at random among the
# free ones by their names (point lookups of the primary key, no range of rows that every
# turn of an organization reads), taken only when both are there.
_FREE_SLOTS = """
WITH free_user AS MATERIALIZED (
    SELECT %(user)s || n AS name FROM generate_series(0, %(user_cap)s - 1) AS n
    WHERE NOT EXISTS (SELECT 1 FROM memory_lease AS l
        WHERE l.name = %(user)s || n AND l.expires_at > %(now)s)
    ORDER BY random() LIMIT 1),
free_org AS MATERIALIZED (
    SELECT %(org)s || n AS name FROM generate_series(0, %(org_cap)s - 1) AS n
    WHERE NOT EXISTS (SELECT 1 FROM memory_lease AS l
        WHERE l.name = %(org)s || n AND l.expires_at > %(now)s)
    ORDER BY random() LIMIT 1),
"""
_SLOTS_SQL = (
    _FREE_SLOTS
    + """taken AS (
    INSERT INTO memory_lease AS l (name, holder, acquired_at, expires_at)
    SELECT name, %(token)s, %(now)s, %(expires)s
    FROM (SELECT name FROM free_user UNION ALL SELECT name FROM free_org) AS wanted
    WHERE EXISTS (SELECT 1 FROM free_user) AND EXISTS (SELECT 1 FROM free_org)
    ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,
        acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
    WHERE l.expires_at <= EXCLUDED.acquired_at
    RETURNING l.name)
SELECT EXISTS (SELECT 1 FROM free_user), EXISTS (SELECT 1 FROM free_org),
    ARRAY(SELECT name FROM taken)
"""
)
SLOT_TRIES = 5  # a slot taken between the look and the insert: another one


def _take_slots(*, user_id: int, organization_id: int) -> list[Held]:
    for _ in range(SLOT_TRIES):
        params = _slot_params(user_id=user_id, organization_id=organization_id)
        with connections["default"].cursor() as cursor:
            cursor.execute(_SLOTS_SQL, params)
            user_free, org_free, names = cursor.fetchone()
        _refuse_when_full(user_free=user_free, org_free=org_free)
        slots = [Held(name, params["token"], False) for name in names]
        if len(slots) == 2:
            for held in slots:
                _renewer.add(held)
            return slots
        _release_all(slots)  # one of the two went to another turn meanwhile: try again
    raise TurnCapReached("You already have", settings.TURN_CAP_PER_USER)


def _slot_params(*, user_id: int, organization_id: int) -> dict:
    """The statements' parameters for a user's and an organization's slot, under a new
    holder's token."""
    token, now = uuid.uuid4().hex, timezone.now()
    return {
        "user": f"{USER_SLOT_PREFIX}{user_id}:",
        "org": f"{ORGANIZATION_SLOT_PREFIX}{organization_id}:",
        "user_cap": settings.TURN_CAP_PER_USER,
        "org_cap": settings.TURN_CAP_PER_ORGANIZATION,
        "token": token,
        "now": now,
        "expires": now + timedelta(seconds=LEASE_SECONDS),
    }


def _refuse_when_full(*, user_free: bool, org_free: bool) -> None:
    if not user_free:
        raise TurnCapReached("You already have", settings.TURN_CAP_PER_USER)
    if not org_free:
        raise TurnCapReached("Your organization already has", settings.TURN_CAP_PER_ORGANIZATION)


# A turn's three leases in one statement: the session's turn lease and a slot of the user and
# of the organization, taken only when all three are free. Says which were free, what it
# took, and whether the session's lease was taken over from a dead holder.
_TURN_SQL = (
    _FREE_SLOTS
    + """free_session AS MATERIALIZED (
    SELECT NOT EXISTS (SELECT 1 FROM memory_lease AS l
        WHERE l.name = %(session)s AND l.expires_at > %(now)s) AS free),
taken AS (
    INSERT INTO memory_lease AS l (name, holder, acquired_at, expires_at)
    SELECT name, %(token)s, %(now)s, %(expires)s
    FROM (SELECT %(session)s::varchar AS name UNION ALL SELECT name FROM free_user
        UNION ALL SELECT name FROM free_org) AS wanted
    WHERE (SELECT free FROM free_session)
        AND EXISTS (SELECT 1 FROM free_user) AND EXISTS (SELECT 1 FROM free_org)
    ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,
        acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
    WHERE l.expires_at <= EXCLUDED.acquired_at
    RETURNING l.name, l.xmax <> 0 AS took_over)
SELECT (SELECT free FROM free_session), EXISTS (SELECT 1 FROM free_user),
    EXISTS (SELECT 1 FROM free_org), ARRAY(SELECT name FROM taken),
    COALESCE((SELECT took_over FROM taken WHERE name = %(session)s), false)
"""
)


@contextmanager
def turn_leases(*, session_id: int, user_id: int, organization_id: int) -> Iterator[Held]:
    """:func:`session_lock` and :func:`turn_slots` together, as a turn takes them (the
    session's lease first: waited for, TurnBusy; then the slots: TurnCapReached). On
    PostgreSQL all three are taken in one statement and given back in one."""
    if not _one_statement():
        with (
            session_lock(session_id) as held,
            turn_slots(user_id=user_id, organization_id=organization_id),
        ):
            yield held
        return
    if _stopping.is_set():
        raise ServerStopping()
    taken = _take_turn_leases(session_id, user_id=user_id, organization_id=organization_id)
    try:
        if taken[0].took_over:
            record_interrupted_turn(session_id=session_id)
        yield taken[0]
    finally:
        _release_all(taken)


def _take_turn_leases(session_id: int, *, user_id: int, organization_id: int) -> list[Held]:
    """The session's lease (first) and both slots, held by one token."""
    name = turn_lease_name(session_id)
    deadline = time.monotonic() + settings.TURN_BUSY_WAIT_SECONDS
    slot_tries = SLOT_TRIES
    while True:
        params = {"session": name, **_slot_params(user_id=user_id, organization_id=organization_id)}
        token = params["token"]
        with connections["default"].cursor() as cursor:
            cursor.execute(_TURN_SQL, params)
            session_free, user_free, org_free, names, took_over = cursor.fetchone()
        held = [Held(taken, token, took_over and taken == name) for taken in names]
        if len(held) == 3:
            held.sort(key=lambda lease: lease.name != name)  # the session's first
            for lease in held:
                _renewer.add(lease)
            return held
        if names:  # not all three: give back what was taken
            _delete(names, token)
        if not session_free or (names and name not in names):  # held: wait for it
            if time.monotonic() >= deadline:
                raise TurnBusy()
            time.sleep(0.1)
            continue
        _refuse_when_full(user_free=user_free, org_free=org_free)
        slot_tries -= 1  # a slot went to another turn between the look and the insert
        if slot_tries <= 0:
            raise TurnCapReached("You already have", settings.TURN_CAP_PER_USER)


def _release_all(slots: list[Held]) -> None:
    """Give back leases of one holder in one statement."""
    if not slots:
        return
    for held in slots:
        _renewer.discard(held)
    _delete([held.name for held in slots], slots[0].token)


def _free_slot(prefix: str, cap: int) -> Held | None:
    taken = set(
        Lease.objects.filter(name__startswith=prefix, expires_at__gt=timezone.now()).values_list(
            "name", flat=True
        )
    )
    for number in range(cap):
        name = f"{prefix}{number}"
        if name in taken:
            continue
        try:
            return acquire(name)
        except LeaseBusy:  # taken meanwhile: the next one
            continue
    return None


def stop_accepting_turns() -> None:
    """Refuse new turns from now on (a graceful shutdown has begun)."""
    _stopping.set()


def interrupt_running_turns() -> int:
    """Mark the turns this process still runs as interrupted and free their sessions;
    the last step of a graceful shutdown. Returns how many there were."""
    running = held_by_this_process(TURN_LEASE_PREFIX)
    for held in running:
        try:
            record_interrupted_turn(session_id=int(held.name.removeprefix(TURN_LEASE_PREFIX)))
        except Exception:
            logger.exception("could not record the interrupted turn of %s", held.name)
        release(held)
    return len(running)
