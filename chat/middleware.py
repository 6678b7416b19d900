"""Two small HTTP middlewares: addresses that are not UTF-8, and API answers never stored.

Refuse a request whose address is not UTF-8 text once percent-decoded.

Servers decode such a path differently (daphne turns ``%ED%A0%80`` into replacement
characters, WSGI keeps the escapes), so a fact key in the address could be stored as
something the caller never sent. Nothing here is meant to reach a view: 400.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from django.http import HttpRequest, HttpResponse, JsonResponse


def _raw_path(request: HttpRequest) -> bytes | None:
    """The path's bytes as the client sent them (percent-decoded), where we can tell."""
    scope = getattr(request, "scope", None)
    if scope is not None:  # ASGI: the server keeps the undecoded path
        raw = scope.get("raw_path")
        return unquote_to_bytes(raw) if raw else None
    try:  # WSGI: PATH_INFO holds the decoded bytes as ISO-8859-1 text
        return request.META.get("PATH_INFO", "").encode("iso-8859-1")
    except UnicodeEncodeError:
        return None


class Utf8PathMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw = _raw_path(request)
        if raw is not None:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return JsonResponse(
                    {"detail": "the address is not valid UTF-8 text once percent-decoded"},
                    status=400,
                )
        return self.get_response(request)


class NoStoreApiMiddleware:
    """Every answer of the agents API carries ``Cache-Control: no-store``: it is one user's
    own data, which no browser or proxy cache should keep."""

    PREFIX = "/agents-api/"

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith(self.PREFIX):
            response["Cache-Control"] = "no-store"
        return response
