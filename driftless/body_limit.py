"""Refuse an oversized HTTP body before it is read (ASGI middleware, driftless/asgi.py).

Django's ASGI handler spools a request's whole body to disk before any view (or the
authentication) runs: a 300 MiB body was written for an anonymous request that then got
a 401. Here a body whose ``Content-Length`` is over the limit of its address is answered
413 at once, unread; a body sent without a length is counted as it arrives and the
request is dropped past the limit. The limit is ``MEMORY_IMPORT_MAX_BYTES`` for the
memory import and ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MiB) everywhere else.
"""

from __future__ import annotations

import json

from django.conf import settings

IMPORT_PATH = "/agents-api/memory/import"


def body_limit(path: str) -> int:
    if path.rstrip("/") == IMPORT_PATH:
        return settings.MEMORY_IMPORT_MAX_BYTES
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE or settings.MEMORY_IMPORT_MAX_BYTES


class BodyLimit:
    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.application(scope, receive, send)
        limit = body_limit(scope.get("path", ""))
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return await _refuse(send, limit)
        received = 0

        async def counted():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    return {"type": "http.disconnect"}
            return message

        return await self.application(scope, counted, send)


async def _refuse(send, limit: int) -> None:
    body = json.dumps(
        {"detail": f"the request body is larger than {limit} bytes", "code": "too_large"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
