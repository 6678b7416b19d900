"""Every REST error answers one shape, and a domain refusal is mapped here, once.

A refusal of the domain (memory/lib/errors.py ``Refused``: bad input, the guard, a busy
session, a server restarting) answers its own HTTP status; DRF's own errors (not found,
not authenticated, throttled, a body that is not JSON) keep theirs. Every body is

    {"detail": "what is wrong, in a sentence", "code": "stable_code"}

plus, when input was refused, ``"field"`` (the first field at fault) and ``"errors"``
(every field's messages: DRF's validation shape). The code is the one the websocket's
``error`` frame carries for the same input, so a program handles both alike.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.exceptions import APIException, ErrorDetail, ValidationError
from rest_framework.views import exception_handler as drf_exception_handler

from memory.lib.errors import InvalidInput, Refused, Unavailable

RETRY_AFTER_SECONDS = 5


class RefusedByDomain(APIException):
    """A domain refusal as DRF answers it: its status, message and code."""

    def __init__(self, refused: Refused) -> None:
        super().__init__(detail=refused.message, code=refused.code)
        self.status_code = refused.status


def as_api_exception(refused: Refused) -> APIException:
    if isinstance(refused, InvalidInput):
        return ValidationError({refused.field: [refused.message]}, code=refused.code)
    return RefusedByDomain(refused)


def exception_handler(exc: Exception, context: dict) -> Any:
    retry_later = isinstance(exc, Unavailable)
    if isinstance(exc, Refused):
        exc = as_api_exception(exc)
    elif isinstance(exc, Http404):  # as DRF's own handler turns them, so the body has a code
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    response.data = error_body(exc)
    if retry_later or response.status_code == status.HTTP_503_SERVICE_UNAVAILABLE:
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def error_body(exc: APIException) -> dict[str, Any]:
    if not isinstance(exc, ValidationError):
        detail = exc.detail
        code = getattr(detail, "code", None) or exc.default_code
        return {"detail": str(detail), "code": code}
    errors = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
    field, first = _first_error(errors)
    body = {"detail": str(first), "code": getattr(first, "code", None) or "invalid"}
    if field != "non_field_errors":
        body["field"] = field
    body["errors"] = _messages(errors)
    return body


def _first_error(errors: dict) -> tuple[str, ErrorDetail | str]:
    """The first field and its first message, nested serializers walked into."""
    for field, value in errors.items():
        while isinstance(value, dict | list) and value:
            value = next(iter(value.values())) if isinstance(value, dict) else value[0]
        return str(field), value
    return "non_field_errors", "invalid input"


def _messages(value: Any) -> Any:
    """ErrorDetail strings as plain strings (what JSON carries anyway)."""
    if isinstance(value, dict):
        return {key: _messages(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_messages(item) for item in value]
    return str(value)
