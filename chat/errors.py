"""What users see of a failure: a plain sentence and an error id, never an internal address.

The detail (traceback, the model endpoint's URL, the provider's answer) goes to the log
under the same id, so an operator finds it from what the user reports.
"""

from __future__ import annotations

import logging
import re
import uuid

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

logger = logging.getLogger("driftless.errors")

SERVER_ERROR_TEXT = "Something went wrong on our side."
# A URL, or an IPv4/IPv6 address with an optional port: what must not reach a user.
_ADDRESS = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]*://\S+"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"
    r"|\[[0-9A-Fa-f:]+\](?::\d+)?"
)


def new_error_id() -> str:
    return uuid.uuid4().hex[:12]


def without_addresses(text: str) -> str:
    return _ADDRESS.sub("[address]", text)


def log_error(message: str, *args: object, exc_info: object = None) -> str:
    """Log the detail under a fresh error id and return the id, for the user's message."""
    error_id = new_error_id()
    logger.error("[error %s] " + message, error_id, *args, exc_info=exc_info)
    return error_id


def public_failure(text: str, error_id: str) -> str:
    """A failure as a user reads it: the text without addresses, then the error id."""
    return f"{without_addresses(text).rstrip('. ')} (error id {error_id})"


# Exceptions Django answers itself with a 4xx (not found, forbidden, bad request).
_ANSWERED_BY_DJANGO = (Http404, PermissionDenied, BadRequest, SuspiciousOperation)


class ErrorIdMiddleware:
    """An unhandled exception in a view: logged with an error id, answered with the id
    (JSON under the API, a page elsewhere). Under DEBUG, Django's debug page as usual."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if settings.DEBUG or isinstance(exception, _ANSWERED_BY_DJANGO):
            return None
        error_id = log_error(
            "%s %s failed",
            request.method,
            request.path,
            exc_info=(type(exception), exception, exception.__traceback__),
        )
        if request.path.startswith("/agents-api/"):
            return JsonResponse({"detail": SERVER_ERROR_TEXT, "error_id": error_id}, status=500)
        return render(
            request, "500.html", {"error_id": error_id, "message": SERVER_ERROR_TEXT}, status=500
        )
