"""Fair sharing on the websocket (ASGI middleware in front of the consumer, driftless/asgi.py).

* **Sockets per user**: a server process keeps at most ``SOCKETS_PER_USER`` open sockets of
  one user; one more is refused (closed with 1013, try again later) before the consumer
  runs. The count is per process (each keeps its own), so with N processes a user holds
  at most N times as many.
* **Frames per socket**: at most ``SOCKET_FRAMES_PER_MINUTE`` frames a minute reach the
  consumer; past it a frame is dropped unread and the socket is told once a minute with an
  ``error`` frame (code ``rate_limited``), and stays open.

Turns themselves are capped per user and per organization (memory/stores/leases.py); this
bounds what the frames around them cost.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict

from django.conf import settings

from memory.events import error_event

CLOSE_TRY_AGAIN_LATER = 1013
WINDOW_SECONDS = 60.0
RATE_LIMITED_MESSAGE = "too many frames in a minute; this one was not read"

_open: dict[int, int] = defaultdict(int)
_open_lock = threading.Lock()


def open_sockets(user_id: int) -> int:
    with _open_lock:
        return _open.get(user_id, 0)


class SocketLimits:
    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        user_id = getattr(user, "pk", None) if getattr(user, "is_authenticated", False) else None
        if user_id is None:  # the consumer refuses it (4401)
            return await self.application(scope, receive, send)
        with _open_lock:
            if _open[user_id] >= settings.SOCKETS_PER_USER:
                refused = True
            else:
                refused = False
                _open[user_id] += 1
        if refused:
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER})
            return None
        try:
            return await self.application(scope, _limited(receive, send), send)
        finally:
            with _open_lock:
                _open[user_id] -= 1
                if _open[user_id] <= 0:
                    del _open[user_id]


def _limited(receive, send):
    started, count, told = time.monotonic(), 0, False

    async def limited_receive():
        nonlocal started, count, told
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                return message
            now = time.monotonic()
            if now - started >= WINDOW_SECONDS:
                started, count, told = now, 0, False
            count += 1
            if count <= settings.SOCKET_FRAMES_PER_MINUTE:
                return message
            if not told:
                told = True
                event = error_event("rate_limited", RATE_LIMITED_MESSAGE)
                await send({"type": "websocket.send", "text": json.dumps(event)})

    return limited_receive
