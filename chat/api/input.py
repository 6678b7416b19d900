"""How the REST API reads input: one JSON parser with a depth limit, and strict fields
built on the domain's checks (their refusals answer as chat/api/errors.py says). The
websocket answers the same checks with an ``error`` frame (chat/consumers.py), so both
refuse the same inputs with the same codes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

from memory.lib.errors import InvalidInput
from memory.lib.validation import check_json_depth


class DepthLimitedJSONParser(JSONParser):
    """DRF's JSON parser, refusing documents nested deeper than MAX_JSON_DEPTH (before
    parsing them) and bytes that are not text in the declared encoding."""

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        encoding = (parser_context or {}).get("encoding") or "utf-8"
        try:
            text = (stream.read() if stream is not None else b"").decode(encoding)
        except (LookupError, UnicodeError) as err:
            raise ParseError(f"JSON parse error - the body is not {encoding} text") from err
        try:
            check_json_depth(text, field="body")
            return json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except InvalidInput as err:
            raise ParseError(f"JSON parse error - {err.message}") from err
        except ValueError as err:
            raise ParseError(f"JSON parse error - {err}") from err


class CheckedField(serializers.Field):
    """A field whose raw JSON value goes to a domain ``check_*`` function as it came:
    no coercion (``5`` is not the title ``"5"``); its InvalidInput is this field's error."""

    def __init__(self, check: Callable[[object], Any], *, schema: dict | None = None, **kwargs):
        self.check = check
        super().__init__(**kwargs)
        if schema is not None:  # the OpenAPI schema of this field, limits included
            extend_schema_field(schema)(self)

    def to_internal_value(self, data: object) -> Any:
        try:
            return self.check(data)
        except InvalidInput as err:
            raise ValidationError(err.message, code=err.code) from err

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(OpenApiTypes.STR)
class CheckedTextField(CheckedField):
    """Text checked by the domain (the schema says string)."""


class StrictPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """An id that must be a JSON integer: ``1.5`` or ``"1"`` is refused, not read as 1."""

    def to_internal_value(self, data: object) -> Any:
        if isinstance(data, bool) or not isinstance(data, int):
            raise ValidationError("expected an integer id", code="wrong_type")
        return super().to_internal_value(data)
