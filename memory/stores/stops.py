"""Stop requests for running turns: the user's Stop (``turn.cancel`` on the socket, or
``POST /agents-api/sessions/<id>/cancel``), from any tab, process or interface.

A request writes a fresh token under the session's cache key; the turn that is running
read the key when it began and looks again as its reply streams (at most every
``CHECK_SECONDS``): a different token means stop. So a request made when no turn runs
stops nothing later. Within one process the running turn is also told at once (an
``Event``), so the cache is only the way across processes; were the cache down, a Stop
sent to another process would be lost, never the turn or its reply.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache import cache
from django.utils import timezone

from memory.models import Lease
from memory.stores.leases import turn_lease_name

# How often a streaming turn looks for a Stop sent to another process.
CHECK_SECONDS = 0.2
# A request outlives any turn it could be meant for.
REQUEST_SECONDS = 3600


def _key(session_id: int) -> str:
    return f"turn-stop:{session_id}"


class StopSignal:
    """What a running turn asks, between the pieces of its reply: was I stopped?"""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.event = threading.Event()
        self._baseline = cache.get(_key(session_id))
        self._next_check = 0.0

    def requested(self) -> bool:
        if self.event.is_set():
            return True
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + CHECK_SECONDS
        if cache.get(_key(self.session_id)) != self._baseline:
            self.event.set()
        return self.event.is_set()


_running: dict[int, StopSignal] = {}
_running_lock = threading.Lock()


@contextmanager
def watching(session_id: int) -> Iterator[StopSignal]:
    """The stop signal of the turn running in this block (under the session's lock)."""
    signal = StopSignal(session_id)
    with _running_lock:
        _running[session_id] = signal
    try:
        yield signal
    finally:
        with _running_lock:
            if _running.get(session_id) is signal:
                del _running[session_id]


def request_stop(*, session_id: int) -> bool:
    """Ask the session's running turn to stop; whether a turn was running to be asked."""
    cache.set(_key(session_id), uuid.uuid4().hex, REQUEST_SECONDS)
    with _running_lock:
        signal = _running.get(session_id)
    if signal is not None:
        signal.event.set()
        return True
    running = Lease.objects.filter(name=turn_lease_name(session_id), expires_at__gt=timezone.now())
    return running.exists()
