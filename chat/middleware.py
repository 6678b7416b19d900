"""Small HTTP middlewares: addresses that are not UTF-8, API answers never stored, and a
rate on the pages that cost work.

Refuse a request whose address is not UTF-8 text once percent-decoded.

Servers decode such a path differently (daphne turns ``%ED%A0%80`` into replacement
characters, WSGI keeps the escapes), so a fact key in the address could be stored as
something the caller never sent. Nothing here is meant to reach a view: 400.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.core.cache import cache
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


class CostlyPageRateMiddleware:
    """The pages that cost work (a search, a new session) are answered at most
    ``PAGE_RATE_PER_MINUTE`` times a minute per user (each address when logged out);
    past it a 429 says when to try again. The API has its own throttle (DRF)."""

    PATHS = ("/search/", "/sessions/start/")
    WINDOW_SECONDS = 60

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path in self.PATHS and self._over_rate(request):
            response = HttpResponse(
                "Too many searches or new sessions in a minute. Wait a moment, then try again.",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            response["Retry-After"] = str(self.WINDOW_SECONDS)
            return response
        return self.get_response(request)

    def _over_rate(self, request: HttpRequest) -> bool:
        user = getattr(request, "user", None)
        who = f"user:{user.pk}" if user is not None and user.is_authenticated else None
        if who is None:
            from chat.login_throttle import client_address

            who = f"address:{client_address(request)}"
        key = f"page-rate:{request.path}:{who}"
        cache.add(key, 0, timeout=self.WINDOW_SECONDS)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=self.WINDOW_SECONDS)
            count = 1
        return count > settings.PAGE_RATE_PER_MINUTE
