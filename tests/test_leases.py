"""Leases (memory/stores/leases.py): database locks that free themselves when their holder dies,
and the sweep that finishes the turns of dead holders (memory/actions/scheduling.py)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.actions.scheduling import sweep
from memory.models import Lease, Message
from memory.stores import leases
from memory.stores.leases import turn_lease_name
from memory.stores.messages import INTERRUPTED_TEXT

pytestmark = pytest.mark.django_db(transaction=True)


def expire(name: str) -> None:
    """What a holder's death looks like once ``LEASE_SECONDS`` have passed."""
    Lease.objects.filter(name=name).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_a_held_lease_is_refused_to_others_and_free_once_released():
    with leases.lease("turn:1") as held:
        assert not held.took_over
        with pytest.raises(leases.LeaseBusy):
            leases.acquire("turn:1")
        assert leases.held_by_this_process("turn:") == [held]
    assert not Lease.objects.exists()
    leases.release(leases.acquire("turn:1"))


def test_an_expired_lease_is_taken_over_and_says_so():
    dead = leases.acquire("turn:2")
    leases._renewer.discard(dead)  # its process died: nothing renews it any more
    expire("turn:2")

    taken = leases.acquire("turn:2")

    assert taken.took_over
    leases.release(dead)  # the dead holder's late release frees nothing of the new one
    assert Lease.objects.get(name="turn:2").holder == taken.token
    leases.release(taken)


def test_a_live_holder_keeps_its_lease_past_its_first_expiry(monkeypatch):
    monkeypatch.setattr(leases, "LEASE_SECONDS", 1)
    monkeypatch.setattr(leases, "RENEW_SECONDS", 0.2)
    monkeypatch.setattr(leases, "_renewer", leases._Renewer())  # one that runs at that pace
    with leases.lease("evaluation:3"):
        time.sleep(2.0)
        with pytest.raises(leases.LeaseBusy):
            leases.acquire("evaluation:3")


def test_the_sweep_finishes_the_turn_of_a_dead_server(session):
    session.append_message(role=Message.Role.USER, content="Plan my week")
    dead = leases.acquire(turn_lease_name(session.pk))
    leases._renewer.discard(dead)

    assert sweep().interrupted_turns == 0  # still within its lease: maybe alive
    expire(turn_lease_name(session.pk))
    assert sweep().interrupted_turns == 1

    roles = list(session.messages.order_by("seq").values_list("role", "content"))
    assert roles == [("user", "Plan my week"), ("error", INTERRUPTED_TEXT)]
    assert not Lease.objects.exists()
    assert sweep().interrupted_turns == 0  # once


def test_a_dead_holder_whose_turn_had_ended_leaves_no_error_record(session):
    session.append_message(role=Message.Role.USER, content="Hi")
    session.append_message(role=Message.Role.ASSISTANT, content="Hello.")
    leases._renewer.discard(leases.acquire(turn_lease_name(session.pk)))
    expire(turn_lease_name(session.pk))

    assert sweep().interrupted_turns == 0
    assert session.messages.count() == 2
    assert not Lease.objects.exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's one-statement paths")
def test_a_turns_locks_cost_one_statement_each_way():
    with CaptureQueriesContext(connection) as taking:
        held = leases.acquire("turn:9")
    with CaptureQueriesContext(connection) as giving_back:
        leases.release(held)
    assert len(taking.captured_queries) == len(giving_back.captured_queries) == 1

    with CaptureQueriesContext(connection) as slots:
        with leases.turn_slots(user_id=1, organization_id=1):
            assert len(slots.captured_queries) == 1  # the user's and the organization's
            assert Lease.objects.filter(name__startswith="turn-slot:").count() == 2
    assert len(slots.captured_queries) == 3  # taken, counted here, given back
    assert not Lease.objects.exists()


pg_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's one-statement paths"
)


@pg_only
def test_a_turn_takes_its_lease_and_both_slots_in_one_statement_and_gives_them_back_in_one():
    with CaptureQueriesContext(connection) as taking:
        with leases.turn_leases(session_id=5, user_id=1, organization_id=1) as held:
            assert len(taking.captured_queries) == 1
            assert held.name == turn_lease_name(5) and not held.took_over
            names = set(Lease.objects.values_list("name", flat=True))
            assert turn_lease_name(5) in names and len(names) == 3
    assert len(taking.captured_queries) == 3  # taken, read here, given back
    assert not Lease.objects.exists()


@pg_only
def test_a_busy_session_waits_then_refuses_and_takes_no_slot(settings):
    settings.TURN_BUSY_WAIT_SECONDS = 0.3
    with leases.lease(turn_lease_name(6)):
        with pytest.raises(leases.TurnBusy):
            with leases.turn_leases(session_id=6, user_id=1, organization_id=1):
                pass
        assert list(Lease.objects.values_list("name", flat=True)) == [turn_lease_name(6)]


@pg_only
def test_a_user_at_its_cap_is_refused_at_once_and_the_session_stays_free(settings):
    settings.TURN_CAP_PER_USER = 1
    with leases.turn_leases(session_id=7, user_id=1, organization_id=1):
        started = time.monotonic()
        with pytest.raises(leases.TurnCapReached, match="You already have 1"):
            with leases.turn_leases(session_id=8, user_id=1, organization_id=1):
                pass
        assert time.monotonic() - started < 1
        assert not Lease.objects.filter(name=turn_lease_name(8)).exists()
    assert not Lease.objects.exists()


@pg_only
def test_a_turn_that_takes_over_a_dead_turns_lease_leaves_its_error_record_first(session):
    session.append_message(role=Message.Role.USER, content="Plan my week")
    leases._renewer.discard(leases.acquire(turn_lease_name(session.pk)))
    expire(turn_lease_name(session.pk))

    with leases.turn_leases(
        session_id=session.pk, user_id=session.user_id, organization_id=session.organization_id
    ) as held:
        assert held.took_over

    roles = list(session.messages.order_by("seq").values_list("role", "content"))
    assert roles == [("user", "Plan my week"), ("error", INTERRUPTED_TEXT)]
