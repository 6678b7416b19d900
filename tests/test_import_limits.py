"""An import holds to the limits every other interface enforces: each refusal a 4xx in
JSON, nothing stored, and the pages keep working (issue 20)."""

import json
import threading
import uuid

import pytest
from django.db import DataError, connection, connections

from memory.actions import portability
from memory.actions.portability import MAX_SEQ, ImportBusy, ImportRefused, import_memory
from memory.lib.limits import MAX_SUMMARY_CHARS
from memory.models import Message, Session
from memory.stores.facts import read_facts

WHEN = "2026-01-01T00:00:00+00:00"


def _document(sessions=1, topics=1, messages=1, **message):
    return {
        "format": "driftless.memory",
        "version": 1,
        "facts": {"editor": "helix"},
        "sessions": [
            {
                "uid": str(uuid.uuid4()),
                "title": "Imported",
                "created_at": WHEN,
                "topics": [
                    {
                        "uid": str(uuid.uuid4()),
                        "title": "A topic",
                        "summary": "Short.",
                        "created_at": WHEN,
                        "messages": [
                            {"seq": n + 1, "role": "user", "content": "hello", "created_at": WHEN}
                            | message
                            for n in range(messages)
                        ],
                    }
                    for _ in range(topics)
                ],
            }
            for _ in range(sessions)
        ],
    }


def _post(client, agent, body):
    if not isinstance(body, str | bytes):
        body = json.dumps(body)
    return client.post(
        f"/agents-api/memory/import?agent={agent.pk}", body, content_type="application/json"
    )


def _nothing_stored(alice, agent):
    assert not Session.objects.filter(user=alice).exists()
    assert not Message.objects.exists()
    assert read_facts(user=alice, agent=agent) == {}


@pytest.mark.parametrize(
    "when",
    [
        "9999-12-31T23:59:59-14:00",  # year 10000 once in UTC: Python cannot read it back
        "0001-01-01T00:00:00+14:00",  # year 0 once in UTC
        "1969-12-31T23:59:59+00:00",
        "2999-01-01T00:00:00+00:00",
        "2026-13-01T00:00:00+00:00",
    ],
)
def test_an_out_of_range_date_is_a_400_and_the_pages_keep_working(as_alice, alice, agent, when):
    document = _document()
    document["sessions"][0]["created_at"] = when
    response = _post(as_alice, agent, document)
    assert response.status_code == 400, response.content
    assert "sessions[0].created_at" in response.json()["errors"]["document"][0]
    _nothing_stored(alice, agent)
    for where in ("topics", "messages"):
        spoiled = _document()
        target = spoiled["sessions"][0]["topics"][0]
        (target["messages"][0] if where == "messages" else target)["created_at"] = when
        assert _post(as_alice, agent, spoiled).status_code == 400
    _nothing_stored(alice, agent)
    assert as_alice.get("/").status_code == 200
    assert as_alice.get("/sessions/nav/").status_code == 200


def test_dates_are_stored_in_utc(alice, agent):
    document = _document()
    document["sessions"][0]["created_at"] = "2026-01-01T10:00:00+14:00"
    import_memory(user=alice, agent=agent, document=document)
    created = Session.objects.get(user=alice).created_at
    assert created.isoformat() == "2025-12-31T20:00:00+00:00"


def _deep(levels):
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        (lambda d: _topic(d).update(summary="s" * (MAX_SUMMARY_CHARS + 1)), "summary: at most"),
        (lambda d: _message(d).update(content="m" * 200_000), "content: at most 16000"),
        (lambda d: _message(d).update(role="tool", content="t" * 20_001), "content: at most"),
        (lambda d: d["sessions"][0].update(title="t" * 201), "title: at most 200"),
        (lambda d: _message(d).update(seq=2**31 - 1), "seq"),
        (lambda d: _message(d).update(seq=MAX_SEQ + 1), "seq"),
        (lambda d: _message(d).update(tool_calls=[{"a": json.loads(_deep(31))}]), "deeper"),
        (lambda d: _message(d).update(tool_calls=[{"id": str(n)} for n in range(17)]), "16"),
        (lambda d: _message(d).update(tool_calls=[{"x": "y" * 20_001}]), "tool_calls"),
    ],
)
def test_each_import_limit_is_a_400_and_nothing_is_stored(as_alice, alice, agent, spoil, says):
    document = _document()
    spoil(document)
    response = _post(as_alice, agent, document)
    assert response.status_code == 400, response.content
    assert says in response.json()["errors"]["document"][0]
    _nothing_stored(alice, agent)


def _topic(document):
    return document["sessions"][0]["topics"][0]


def _message(document):
    return _topic(document)["messages"][0]


def test_json_nested_fifty_thousand_deep_is_a_json_400(as_alice, alice, agent):
    body = '{"format": "driftless.memory", "version": 1, "facts": {"x": ' + _deep(50_000) + "}}"
    response = _post(as_alice, agent, body)
    assert response.status_code == 400
    assert "nested deeper than" in response.json()["detail"]
    _nothing_stored(alice, agent)


def test_what_one_import_may_create_is_capped(alice, agent, monkeypatch):
    monkeypatch.setattr(portability, "MAX_MESSAGES", 10)
    with pytest.raises(ImportRefused, match="at most 10 messages"):
        import_memory(user=alice, agent=agent, document=_document(sessions=2, messages=6))
    monkeypatch.setattr(portability, "MAX_TOPICS", 3)
    with pytest.raises(ImportRefused, match="at most 3 topics"):
        import_memory(user=alice, agent=agent, document=_document(sessions=2, topics=2, messages=0))
    with pytest.raises(ImportRefused, match="sessions: at most 500"):
        import_memory(user=alice, agent=agent, document=_document(sessions=501, topics=0))
    _nothing_stored(alice, agent)


def test_an_import_up_to_the_documented_size_is_read_and_refused_past_it_in_json(
    as_alice, alice, agent, settings
):
    # Over Django's 2.5 MiB body limit, under MEMORY_IMPORT_MAX_BYTES: read, then judged.
    assert settings.MEMORY_IMPORT_MAX_BYTES == 20 * 1024 * 1024
    document = _document()
    document["facts"] = {"big": "x" * 3_000_000}
    response = _post(as_alice, agent, document)
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "facts['big']" in response.json()["errors"]["document"][0]
    settings.MEMORY_IMPORT_MAX_BYTES = 1_000_000
    response = _post(as_alice, agent, document)
    assert response.status_code == 400
    assert response.json()["detail"] == "the document is larger than 1000000 bytes"
    _nothing_stored(alice, agent)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_concurrent_import_into_the_same_scope_is_a_409(client, alice, agent):
    """While one import runs (its scope lock held), a second is refused, never queued."""
    held, release = threading.Event(), threading.Event()

    def first_import():
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("BEGIN")
                scope = {
                    "agent_id": agent.pk,
                    "user_id": alice.pk,
                    "organization_id": agent.organization_id,
                }
                original, portability.connection = portability.connection, other
                try:
                    portability._lock_scope(scope)
                finally:
                    portability.connection = original
                held.set()
                release.wait(10)
                cursor.execute("ROLLBACK")
        finally:
            other.close()

    thread = threading.Thread(target=first_import)
    thread.start()
    try:
        assert held.wait(10)
        client.force_login(alice)
        response = _post(client, agent, _document())
        assert response.status_code == 409, response.content
        assert response.json()["code"] == ImportBusy.code
        assert not Session.objects.filter(user=alice).exists()
    finally:
        release.set()
        thread.join()
    assert _post(client, agent, _document()).status_code == 200
    assert connection.vendor == "postgresql"


@pytest.mark.postgres
def test_a_year_10000_date_stored_before_the_fix_is_repaired_by_the_migration(
    as_alice, alice, agent
):
    import importlib

    repair = importlib.import_module("memory.migrations.0012_repair_out_of_range_dates").repair
    session = Session.objects.start(user=alice, agent=agent, title="From a bad import")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_session SET created_at = '9999-12-31T23:59:59-14:00' WHERE id = %s",
            [session.pk],
        )
    with pytest.raises((ValueError, DataError)):  # what the pages met: year 10000
        Session.objects.get(pk=session.pk)
    repair(None, connection.schema_editor())
    assert Session.objects.get(pk=session.pk).created_at.year < 10000
    assert as_alice.get("/").status_code == 200
