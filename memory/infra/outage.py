"""Redis is a speed-up, never the only copy: what each use of it does while it is down.

* The cache (django-redis) is configured to miss, not raise, when Redis fails
  (``IGNORE_EXCEPTIONS`` in driftless/settings.py): every read through it, persistent
  memory included, falls back to the database, and a failed write is only a lost speed-up.
* Locks that must hold are leases in the database (memory/stores/leases.py), not cache keys.
* Events (memory/events.py) are best effort: a turn never fails because a client could
  not be told; the channel-layer breaker below stops a dead Redis from costing every
  reply delta a connection attempt and a logged traceback.
* Evaluation tasks are recorded as due in the database before they are enqueued; the
  broker breaker skips the broker for a few seconds after it failed, and the sweep
  (memory/actions/scheduling.py) enqueues whatever is overdue once it is back.

Each breaker opens for ``cooldown`` seconds after a failure and closes by itself, so
everything recovers when Redis returns, with no restart; it closes sooner when the service
is seen answering (:meth:`Breaker.succeeded`: a websocket joined its groups). What a
breaker skips is counted, never dropped in silence (memory/events.py: the socket of a turn
whose events were skipped is told and closed, and the page re-syncs).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)


class Breaker:
    """Skip a failing service for ``cooldown`` seconds after each failure."""

    def __init__(self, name: str, *, cooldown: float) -> None:
        self.name = name
        self.cooldown = cooldown
        self._open_until = 0.0
        self._lock = threading.Lock()

    def reset(self) -> None:
        self._open_until = 0.0

    def allows(self) -> bool:
        return time.monotonic() >= self._open_until

    @contextmanager
    def watch(self) -> Iterator[None]:
        """Run a call to the service; a failure opens the breaker and is re-raised."""
        try:
            yield
        except Exception as err:
            with self._lock:
                already_open = self._open_until > 0.0
                self._open_until = time.monotonic() + self.cooldown
            if not already_open:
                logger.warning(
                    "%s unavailable (%s); retrying in %ss", self.name, err, self.cooldown
                )
            raise
        self.succeeded()

    def succeeded(self) -> None:
        """The service answered (a call through :meth:`watch`, or another client of the
        same service): close at once, not when the cooldown ends."""
        if self._open_until:
            with self._lock:
                self._open_until = 0.0
            logger.warning("%s available again", self.name)


broker_breaker = Breaker("the task broker", cooldown=5.0)
channel_breaker = Breaker("the channel layer", cooldown=2.0)
