"""An unhandled exception in a view: a plain sentence and an error id for the user (the
helpers are memory/lib/errors.py's, shared with the turn), never an internal address.

The detail (traceback, the model endpoint's URL, the provider's answer) goes to the log
under the same id, so an operator finds it from what the user reports.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from memory.lib.errors import log_error

SERVER_ERROR_TEXT = "Something went wrong on our side."


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
