"""OpenAPI components made from the domain's payload types (memory/events.py).

A message and a topic have one representation, the ``TypedDict`` the websocket events carry;
the REST API answers the same dicts. :func:`payload_serializer` wraps such a type in a
serializer that answers its dicts as they are (so it nests, and ``many=True`` works, like
any serializer), and the extension below documents it: its component (named without the
``Payload`` suffix: ``Message``, ``Topic``) is pydantic's JSON Schema of the type, written
the OpenAPI 3.0 way.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.plumbing import ResolvedComponent, get_class
from pydantic import TypeAdapter
from rest_framework import serializers

REF_TEMPLATE = "#/components/schemas/{model}"


def component_name(payload: type) -> str:
    return payload.__name__.removesuffix("Payload")


class PayloadSerializer(serializers.Serializer):
    """Answers a payload dict (``payload``, a TypedDict) as it is."""

    payload: type

    def to_representation(self, instance: Any) -> Any:
        return instance


def payload_serializer(payload: type) -> type[PayloadSerializer]:
    name = f"{component_name(payload)}Serializer"
    return type(name, (PayloadSerializer,), {"payload": payload, "__module__": __name__})


class PayloadExtension(OpenApiSerializerExtension):
    target_class = PayloadSerializer
    match_subclasses = True

    def get_name(self, auto_schema, direction) -> str:
        return component_name(get_class(self.target).payload)

    def map_serializer(self, auto_schema, direction) -> dict:
        payload = get_class(self.target).payload
        schema = TypeAdapter(payload).json_schema(ref_template=REF_TEMPLATE)
        for name, definition in schema.pop("$defs", {}).items():
            component = ResolvedComponent(
                name=name.removesuffix("Payload"),
                type=ResolvedComponent.SCHEMA,
                object=name,
                schema=openapi_30(definition),
            )
            auto_schema.registry.register_on_missing(component)
        return openapi_30(schema)


def openapi_30(schema: Any) -> Any:
    """JSON Schema 2020-12 as OpenAPI 3.0 reads it: ``anyOf [X, null]`` becomes ``X`` with
    ``nullable`` (a reference: ``allOf [ref]``); pydantic's titles go (the names say it)."""
    if isinstance(schema, list):
        return [openapi_30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key == "properties":  # keyed by property names: a property may be called title
            converted[key] = {name: openapi_30(item) for name, item in value.items()}
        else:
            converted[key] = openapi_30(value)
    choices = converted.get("anyOf")
    if isinstance(choices, list) and {"type": "null"} in choices:
        rest = [choice for choice in choices if choice != {"type": "null"}]
        del converted["anyOf"]
        if len(rest) == 1 and "$ref" in rest[0]:
            converted["allOf"] = rest
        elif len(rest) == 1:
            converted.update(rest[0])
        else:
            converted["anyOf"] = rest
        converted["nullable"] = True
    return converted
