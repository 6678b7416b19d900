"""The OpenAPI schema of /agents-api/: generated without complaints and valid OpenAPI 3."""

from __future__ import annotations

import pytest
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

SESSION_PATHS = {
    "/agents-api/agents/": {"get"},
    "/agents-api/sessions/": {"get", "post"},
    "/agents-api/sessions/{session_id}/": {"get"},
    "/agents-api/sessions/{session_id}/messages": {"post"},
    "/agents-api/sessions/{session_id}/topics/": {"get", "post"},
    "/agents-api/topics/{topic_id}/messages": {"get"},
}


@pytest.fixture
def generated():
    """The schema and every warning or error drf-spectacular raised while building it."""
    GENERATOR_STATS.reset()
    with GENERATOR_STATS.silence():
        schema = SchemaGenerator().get_schema(request=None, public=True)
    problems = [*GENERATOR_STATS._warn_cache, *GENERATOR_STATS._error_cache]
    GENERATOR_STATS.reset()
    return schema, problems


def test_the_schema_is_valid_openapi(generated):
    schema, _ = generated
    validate_schema(schema)  # raises jsonschema.ValidationError when it is not


def test_the_session_endpoints_are_documented_without_warnings(generated):
    schema, problems = generated
    for path, methods in SESSION_PATHS.items():
        assert methods <= set(schema["paths"][path]), path
    assert [p for p in problems if "chat/api/sessions.py" in p] == []
    turn = schema["paths"]["/agents-api/sessions/{session_id}/messages"]["post"]
    assert {"201", "400", "404", "409", "502"} <= set(turn["responses"])


def test_the_whole_api_is_documented_without_warnings_or_errors(generated):
    _, problems = generated
    assert problems == []


def test_the_project_serves_the_schema_to_logged_in_callers(client, alice):
    assert client.get("/agents-api/schema/").status_code == 401
    client.force_login(alice)
    response = client.get("/agents-api/schema/")
    assert response.status_code == 200
    assert b"/agents-api/sessions/{session_id}/messages" in response.content
