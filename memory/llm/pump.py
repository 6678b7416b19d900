"""A stream read in a thread of its own, so its reader can look up while it is silent.

The turn (memory/actions/turn.py) reads a model's answer through a :class:`Pump`: a cold
prompt can take half a minute to its first token, and the user's Stop must end the turn at
once, not at the next token. Nothing here touches the database.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass

# How many pieces of a model's answer may wait for the turn to read them.
PUMP_AHEAD = 64


class Pump:
    """A model's stream read in a thread of its own, so the turn can look up from it while
    the model is silent (a cold prompt can take half a minute to its first token): a Stop
    then ends the turn at once, not at the next token. ``items`` yields what the model
    yields, and ``None`` each ``every`` seconds of silence; an error of the stream is raised
    in the turn's thread. ``abandon`` closes the stream (from its own thread, at its next
    item or when it ends); no database is touched there."""

    _END = object()

    def __init__(self, answer: Iterator, *, name: str) -> None:
        self._answer = answer
        self._queue: queue.Queue = queue.Queue(maxsize=PUMP_AHEAD)
        self._abandoned = threading.Event()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        try:
            for item in self._answer:
                if not self._hand_over(item):
                    break
        except BaseException as err:  # handed to the turn's thread, which raises it
            self._hand_over(Failed(err))
        finally:
            close = getattr(self._answer, "close", None)
            if close is not None:
                close()
            self._hand_over(self._END)

    def _hand_over(self, item: object) -> bool:
        """Queue ``item`` (the queue is bounded: a model never runs far ahead of the turn);
        False once the turn has abandoned the stream."""
        while not self._abandoned.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def items(self, *, every: float) -> Iterator[object]:
        while True:
            try:
                item = self._queue.get(timeout=every)
            except queue.Empty:
                yield None
                continue
            if item is self._END:
                return
            if isinstance(item, Failed):
                raise item.error
            yield item

    def abandon(self) -> None:
        self._abandoned.set()


@dataclass(frozen=True)
class Failed:
    error: BaseException
