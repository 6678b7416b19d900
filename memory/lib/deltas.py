"""Reply deltas, coalesced: one ``reply.delta`` event per time window, not per token.

Each event costs a channel-layer round trip per socket and a frame, which made per-token
streaming most of a turn's CPU with long replies. The first piece goes out at once (the
time to the first visible text is unchanged); later pieces are held until
``settings.STREAM_BATCH_SECONDS`` have passed since the last event, checked as pieces
arrive; whatever is held goes out when the answer ends (:meth:`DeltaBatcher.flush`).
The page reveals a batch over a few animation frames, so it streams as smoothly.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class DeltaBatcher:
    def __init__(
        self,
        send: Callable[[str], None],
        *,
        seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._seconds = seconds
        self._clock = clock
        self._held: list[str] = []
        self._sent_at: float | None = None

    def add(self, piece: str) -> None:
        if not piece:
            return
        self._held.append(piece)
        now = self._clock()
        if self._sent_at is None or now - self._sent_at >= self._seconds:
            self._emit(now)

    def flush(self) -> None:
        if self._held:
            self._emit(self._clock())

    def take(self) -> str:
        """What is held, no longer held and not sent (the caller sends it its own way)."""
        text, self._held = "".join(self._held), []
        return text

    def _emit(self, now: float) -> None:
        text, self._held = "".join(self._held), []
        self._sent_at = now
        self._send(text)
