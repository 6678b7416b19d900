"""The websocket's Origin check: the page must come from this very site, scheme and port
included.

Channels' ``AllowedHostsOriginValidator`` compares the host alone with ALLOWED_HOSTS, so
``http://chat.example.com:8080`` (another service on the same host) or plain ``http``
passes for an ``https`` site. Here the Origin must name the address the socket itself was
opened on: the scheme (``https`` for a socket over TLS, which a TLS proxy reports with
``X-Forwarded-Proto`` when ``SECURE_PROXY_SSL_HEADER`` is set), the host and the port of
its ``Host`` header, and the host must be one of ALLOWED_HOSTS, or it must be one of
CSRF_TRUSTED_ORIGINS exactly. A request without a ``Host`` header (an in-process test
client) falls back to the host check alone.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import AllowedHostsOriginValidator, WebsocketDenier
from django.conf import settings
from django.http.request import validate_host


def _headers(scope) -> dict[bytes, str]:
    return {name: value.decode("latin1") for name, value in scope.get("headers", [])}


def expected_scheme(scope, headers: dict[bytes, str]) -> str:
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, value = proxy
        header = name.removeprefix("HTTP_").lower().replace("_", "-").encode()
        if headers.get(header, "").split(",")[0].strip() == value:
            return "https"
    return "https" if scope.get("scheme") == "wss" else "http"


def same_origin(scope) -> bool:
    headers = _headers(scope)
    origin = headers.get(b"origin")
    if origin is None:
        return False
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    host = headers.get(b"host")
    parts = urlsplit(origin)
    if host is None or not parts.hostname:
        return False
    if not validate_host(parts.hostname, settings.ALLOWED_HOSTS):
        return False
    return f"{parts.scheme}://{parts.netloc}" == f"{expected_scheme(scope, headers)}://{host}"


class SameOriginValidator:
    """ASGI middleware for websockets: refuse (403) a socket from another origin."""

    def __init__(self, application) -> None:
        self.application = application
        self.by_host = AllowedHostsOriginValidator(application)

    async def __call__(self, scope, receive, send):
        if b"host" not in dict(scope.get("headers", [])):
            return await self.by_host(scope, receive, send)
        if same_origin(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
