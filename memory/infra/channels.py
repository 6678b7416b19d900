"""The channel layer as the domain uses it: a session's group, a send from a worker
thread, and what this process could not deliver (so that no event is lost in silence).

memory/events.py publishes through it; the websocket consumer (chat/consumers.py) reads
:func:`missed_deliveries` around a turn and calls :func:`channel_layer_answered` when its
socket joins its groups.
"""

from __future__ import annotations

import collections
import logging
import threading

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from memory.infra.outage import channel_breaker

logger = logging.getLogger(__name__)


def session_group(session_id: int) -> str:
    """The channel-layer group of a session's websocket clients."""
    return f"session-{session_id}"


def group_send(group: str, message: dict) -> None:
    """Send a channel-layer message to ``group`` from a worker thread (never from the event
    loop): directly when the configured layer can (``group_send_blocking``), else through
    the layer's event loop (the in-process layer of the embedded mode keeps its queues
    there). Raises what the layer raises."""
    layer = get_channel_layer()
    send_blocking = getattr(layer, "group_send_blocking", None)
    if send_blocking is not None:
        send_blocking(group, message)
    else:
        async_to_sync(layer.group_send)(group, message)


# What this process could not deliver (the layer failed, or its breaker was open), so that
# no event is lost in silence (issue 48). Per session, how many deliveries: the socket
# that started a turn compares the count before and after it (chat/consumers.py). And the
# sessions whose other sockets are still to be told, with the time of the last miss: once
# the breaker's cooldown has passed, :func:`_announce_missed` sends each session's group a
# ``session.missed`` message; a socket that joined before that time says
# ``events_unavailable`` and closes, and its page reconnects and re-syncs.
_missed: collections.Counter[int] = collections.Counter()
_unannounced: dict[int, float] = {}
_announcer: threading.Timer | None = None
_missed_lock = threading.Lock()


def record_missed(sessions: dict[int, float]) -> None:
    global _announcer
    with _missed_lock:
        for session_id, when in sessions.items():
            _missed[session_id] += 1
            _unannounced[session_id] = max(when, _unannounced.get(session_id, 0.0))
        if _announcer is None:
            _announcer = threading.Timer(channel_breaker.cooldown, _announce_missed)
            _announcer.name = "announce-missed-events"
            _announcer.daemon = True
            _announcer.start()


def _announce_missed() -> None:
    """Tell the groups of the sessions whose events were not delivered (in a timer thread).
    Still down: everything is kept for the next try, a cooldown later."""
    global _announcer
    with _missed_lock:
        pending = dict(_unannounced)
        _unannounced.clear()
        _announcer = None
    for session_id, until in list(pending.items()):
        try:
            with channel_breaker.watch():
                group_send(session_group(session_id), {"type": "session.missed", "until": until})
        except Exception:
            logger.debug("could not tell session %s of missed events", session_id)
            with _missed_lock:
                for waiting, when in pending.items():
                    _unannounced[waiting] = max(when, _unannounced.get(waiting, 0.0))
            record_missed({})  # schedules the next try
            return
        del pending[session_id]


def forget_missed() -> None:
    """Forget what was not delivered, and the announcement due (a test's fresh start)."""
    global _announcer
    with _missed_lock:
        _missed.clear()
        _unannounced.clear()
        if _announcer is not None:
            _announcer.cancel()
            _announcer = None


def missed_deliveries(session_id: int) -> int:
    """How many deliveries of the session's events this process has failed to make."""
    with _missed_lock:
        return _missed[session_id]


def channel_layer_answered() -> None:
    """The channel layer answered this process (a socket joined its groups): publish
    again at once, not when the breaker's cooldown ends. Without this, the first turn
    after Redis came back lost every event (issue 48)."""
    channel_breaker.succeeded()
