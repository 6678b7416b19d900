"""Memory export and import: the document, the round trip, merging twice, refusals."""

import json

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings

from memory.actions.portability import ImportRefused, export_memory, import_memory
from memory.models import Agent, FactActor, ImportantInfo, Message, Session, Topic
from memory.stores.facts import read_facts, set_fact
from memory.stores.persistent import get_persistent_memory
from tests.memory_builders import add_message, add_tool_round, add_topic


@pytest.fixture
def remembered(alice, agent):
    """Two sessions: a promoted and a deprecated topic, a casual one, a tool round, facts."""
    first = Session.objects.start(user=alice, agent=agent, title="Planning")
    add_message(first, Message.Role.USER, "We use PostgreSQL, not MySQL.")
    add_tool_round(first, ["important_info"], tag="a")
    add_message(first, Message.Role.ASSISTANT, "Noted: PostgreSQL.")
    promoted = first.active_topic()
    Topic.objects.filter(pk=promoted.pk).update(
        title="Database choice",
        summary="DB: PostgreSQL (JSON, FTS).",
        keep_in_memory=True,
        keep_in_memory_manually_set=True,
    )
    add_topic(first, title="Old ORM plan", deprecated=True, age_days=3)
    add_topic(first, title="Weather chat", summary="Casual.", age_days=1)
    second = Session.objects.start(user=alice, agent=agent)
    add_message(second, Message.Role.USER, "Привет! Давай обсудим кэш.")
    set_fact(user=alice, agent=agent, key="editor", value="helix", actor="user")
    set_fact(user=alice, agent=agent, key="team", value={"size": 4, "lead": "Ana"}, actor="user")
    return first, second


def _keys(value):
    if isinstance(value, dict):
        yield from value
        for item in value.values():
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


def titles(document):
    return [topic["title"] for session in document["sessions"] for topic in session["topics"]]


def test_the_memory_export_holds_facts_and_topics_in_memory_only(alice, agent, remembered):
    document = export_memory(user=alice, agent=agent)
    assert document["format"] == "driftless.memory" and document["version"] == 1
    assert document["facts"] == {"editor": "helix", "team": {"size": 4, "lead": "Ana"}}
    assert sorted(titles(document)) == ["Database choice", "Old ORM plan"]
    assert all("messages" not in topic for s in document["sessions"] for topic in s["topics"])
    assert not {key for key in _keys(document) if key == "id" or key.endswith("_id")}


@pytest.mark.postgres
def test_export_import_into_an_empty_scope_and_export_again_is_identical(alice, agent, remembered):
    before = export_memory(user=alice, agent=agent, include_sessions=True)
    Session.objects.filter(user=alice).delete()
    ImportantInfo.objects.filter(user=alice).delete()
    assert export_memory(user=alice, agent=agent, include_sessions=True)["sessions"] == []

    report = import_memory(user=alice, agent=agent, document=json.loads(json.dumps(before)))

    assert (report.sessions_created, report.topics_created) == (2, 4)
    assert report.messages_created == Message.objects.filter(session__user=alice).count() == 5
    assert undated(export_memory(user=alice, agent=agent, include_sessions=True)) == undated(before)
    for session in Session.objects.filter(user=alice):
        assert session.topics.filter(is_active=True).count() == 1
        last = session.messages.order_by("-seq").values_list("seq", flat=True).first()
        assert session.message_count == (last or 0)


def test_importing_the_same_document_twice_changes_nothing(alice, agent, remembered, organization):
    other_agent = Agent.objects.create(organization=organization, name="Second")
    document = export_memory(user=alice, agent=agent, include_sessions=True)
    first = import_memory(user=alice, agent=other_agent, document=document)
    assert first.topics_created == 4
    snapshot = export_memory(user=alice, agent=other_agent, include_sessions=True)
    counts = (Session.objects.count(), Topic.objects.count(), Message.objects.count())

    again = import_memory(user=alice, agent=other_agent, document=document)

    assert (again.sessions_created, again.topics_created, again.topics_updated) == (0, 0, 0)
    assert again.messages_created == 0
    assert (Session.objects.count(), Topic.objects.count(), Message.objects.count()) == counts
    assert undated(export_memory(user=alice, agent=other_agent, include_sessions=True)) == undated(
        snapshot
    )


def test_an_import_merges_facts_by_key_and_topics_by_uid(alice, agent, remembered):
    document = export_memory(user=alice, agent=agent)
    document["facts"] = {"editor": "vim", "os": "Debian"}
    document["sessions"][0]["topics"][0]["summary"] = "DB: PostgreSQL 16 (decided again)."
    report = import_memory(user=alice, agent=agent, document=document)
    assert (report.topics_created, report.topics_updated) == (0, 1)
    assert read_facts(user=alice, agent=agent) == {
        "editor": "vim",
        "os": "Debian",
        "team": {"size": 4, "lead": "Ana"},
    }
    assert (
        Topic.objects.get(title="Database choice").summary == "DB: PostgreSQL 16 (decided again)."
    )


def test_imported_memory_reaches_the_next_context_of_another_session(
    alice, agent, organization, remembered
):
    target = Agent.objects.create(organization=organization, name="Second")
    reader = Session.objects.start(user=alice, agent=target)
    assert get_persistent_memory(session=reader).text == ""  # cached empty
    import_memory(user=alice, agent=target, document=export_memory(user=alice, agent=agent))
    text = get_persistent_memory(session=reader).text
    assert "Database choice" in text and "[DEPRECATED] Old ORM plan" in text


def _valid(alice, agent):
    return export_memory(user=alice, agent=agent, include_sessions=True)


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        (lambda d: d.update(format="other"), "format"),
        (lambda d: d.update(version="1"), "version"),
        (lambda d: d.update(facts=[]), "facts"),
        (lambda d: d["facts"].update(bad="a\x00b"), "facts['bad']"),
        (lambda d: d["sessions"][0]["topics"][0].update(title=5), "sessions[0].topics[0].title"),
        (lambda d: d["sessions"][0]["topics"][0].update(summary="x\ud83dy"), "summary"),
        (lambda d: d["sessions"][0]["topics"][0].update(uid="nope"), "uid"),
        (lambda d: d["sessions"][1].update(uid=d["sessions"][0]["uid"]), "appears twice"),
        (lambda d: d["sessions"][0]["topics"][1].update(active=True), "one topic is active"),
        (lambda d: d["sessions"][0]["topics"][0].update(created_at="yesterday"), "created_at"),
        (lambda d: d["sessions"][0]["topics"][0]["messages"][0].update(role="root"), "role"),
        (lambda d: d["sessions"][0]["topics"][0]["messages"][1].update(seq=1), "sequence"),
        (lambda d: d["sessions"][0]["topics"][0].update(keep_in_memory="yes"), "keep_in_memory"),
    ],
)
def test_a_malformed_document_is_refused_whole_and_changes_nothing(
    alice, agent, organization, remembered, spoil, says
):
    target = Agent.objects.create(organization=organization, name="Second")
    document = _valid(alice, agent)
    document["sessions"][0]["topics"].sort(key=lambda topic: not topic["active"])
    spoil(document)
    with pytest.raises(ImportRefused, match=None) as refused:
        import_memory(user=alice, agent=target, document=document)
    assert says in str(refused.value)
    assert not Session.objects.filter(agent=target).exists()
    assert read_facts(user=alice, agent=target) == {}


# --- REST ---------------------------------------------------------------------------------------


def test_the_export_and_import_endpoints_round_trip(client, alice, agent, organization, remembered):
    client.force_login(alice)
    target = Agent.objects.create(organization=organization, name="Second")
    response = client.get("/agents-api/memory/export", {"agent": agent.pk, "sessions": "true"})
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    assert response.streaming  # a whole history is written a few sessions at a time
    body = b"".join(response.streaming_content)
    assert undated(json.loads(body)) == undated(
        export_memory(user=alice, agent=agent, include_sessions=True)
    )
    imported = client.post(
        f"/agents-api/memory/import?agent={target.pk}",
        body,
        content_type="application/json",
    )
    assert imported.status_code == 200, imported.content
    assert imported.json()["topics_created"] == 4
    assert Topic.objects.filter(session__agent=target, title="Database choice").exists()


def test_a_refused_import_is_a_400_naming_the_field(client, alice, agent, remembered):
    client.force_login(alice)
    document = _valid(alice, agent)
    document["sessions"][0]["title"] = ["not", "text"]
    before = Topic.objects.count()
    response = client.post(
        f"/agents-api/memory/import?agent={agent.pk}", document, content_type="application/json"
    )
    assert response.status_code == 400
    assert "sessions[0].title" in response.json()["errors"]["document"][0]
    assert Topic.objects.count() == before


def test_an_oversized_document_is_refused_and_changes_nothing(client, settings, alice, agent):
    settings.MEMORY_IMPORT_MAX_BYTES = 2048
    client.force_login(alice)
    document = {"format": "driftless.memory", "version": 1, "facts": {"big": "x" * 4000}}
    response = client.post(
        f"/agents-api/memory/import?agent={agent.pk}", document, content_type="application/json"
    )
    assert response.status_code == 400
    assert "larger than 2048 bytes" in response.json()["detail"]
    assert read_facts(user=alice, agent=agent) == {}


def test_a_stranger_can_neither_export_nor_import_through_an_agent_they_cannot_use(
    client, charlie, alice, agent, remembered
):
    client.force_login(charlie)
    assert client.get("/agents-api/memory/export", {"agent": agent.pk}).status_code == 404
    response = client.post(
        f"/agents-api/memory/import?agent={agent.pk}",
        export_memory(user=alice, agent=agent),
        content_type="application/json",
    )
    assert response.status_code == 404
    assert not Session.objects.filter(user=charlie).exists()


def test_a_teammate_exports_only_their_own_scope(client, bob, agent, remembered):
    client.force_login(bob)
    body = client.get("/agents-api/memory/export", {"agent": agent.pk}).json()
    assert body["facts"] == {} and body["sessions"] == []


@pytest.mark.parametrize("params", [{}, {"agent": "x"}, {"agent": "1", "sessions": "maybe"}])
def test_bad_export_parameters_are_400s(client, alice, agent, params):
    client.force_login(alice)
    assert client.get("/agents-api/memory/export", params).status_code == 400


# --- commands and admin -------------------------------------------------------------------------


def test_the_management_commands_export_and_import(
    tmp_path, alice, agent, organization, remembered
):
    target = Agent.objects.create(organization=organization, name="Second")
    path = tmp_path / "memory.json"
    call_command(
        "export_memory", "--username", "alice", "--agent", str(agent.pk), "--output", str(path)
    )
    call_command("import_memory", "--username", "alice", "--agent", str(target.pk), str(path))
    assert read_facts(user=alice, agent=target)["editor"] == "helix"
    path.write_text('{"format": "driftless.memory", "version": 2}')
    with pytest.raises(CommandError, match="nothing was imported: version"):
        call_command("import_memory", "--username", "alice", "--agent", str(target.pk), str(path))
    with pytest.raises(CommandError, match="no agent"):
        call_command("export_memory", "--username", "alice", "--agent", "999999")


def test_the_admin_action_downloads_the_scope(client, alice, agent, remembered):
    from django.contrib.auth import get_user_model

    operator = get_user_model().objects.create_superuser("op", password="pw")
    client.force_login(operator)
    first, second = remembered
    response = client.post(
        "/admin/memory/session/",
        {"action": "export_scope_memory", "_selected_action": [first.pk, second.pk]},
    )
    assert response.status_code == 200
    assert json.loads(response.content)["facts"]["editor"] == "helix"


def test_a_users_correction_travels_and_still_stands_after_import(alice, agent, remembered):
    from memory.actions.curation import do_user_edit_topic

    first, _ = remembered
    topic = first.topics.get(title="Database choice")
    do_user_edit_topic(topic=topic, user=alice, summary="DB: PostgreSQL 16 (JSON, FTS).")
    document = export_memory(user=alice, agent=agent, include_sessions=True)
    topics = [t for session in document["sessions"] for t in session["topics"]]
    [exported] = [t for t in topics if t["uid"] == str(topic.uid)]
    assert exported["summary_manually_set"] is True
    Session.objects.filter(user=alice).delete()

    import_memory(user=alice, agent=agent, document=json.loads(json.dumps(document)))

    imported = Topic.objects.get(uid=topic.uid)
    assert imported.summary == "DB: PostgreSQL 16 (JSON, FTS)." and imported.summary_manually_set
    assert imported.edit_stands  # covers the imported messages: a summary of them keeps it


def test_a_streamed_export_reads_the_sessions_a_few_at_a_time(client, alice, agent, monkeypatch):
    from memory.actions import portability

    for n in range(5):
        session = Session.objects.start(user=alice, agent=agent, title=f"S{n}")
        add_message(session, Message.Role.USER, f"message {n}")
    monkeypatch.setattr(portability, "EXPORT_SESSIONS_AT_ONCE", 2)
    client.force_login(alice)
    response = client.get("/agents-api/memory/export", {"agent": agent.pk, "sessions": "true"})
    chunks = list(response.streaming_content)
    # The head and the end; a session's head and end, its topic's head and end and each
    # message apart (memory/actions/export_text.py): nothing is held whole.
    assert len(chunks) == 2 + 5 * 5
    document = json.loads(b"".join(chunks))
    assert undated(document) == undated(
        export_memory(user=alice, agent=agent, include_sessions=True)
    )
    assert [s["title"] for s in document["sessions"]] == [f"S{n}" for n in range(5)]


def undated(document: dict) -> dict:
    """The document without its export time (each export has its own)."""
    return {key: value for key, value in document.items() if key != "exported_at"}


# Issue 45, item 5: an older export never rolls a newer fact back, and says what it did.


def _import(client, agent, document, **query):
    return client.post(
        f"/agents-api/memory/import?agent={agent.pk}"
        + "".join(f"&{name}={value}" for name, value in query.items()),
        json.dumps(document),
        content_type="application/json",
    )


def test_importing_an_older_export_keeps_the_newer_fact_and_says_so(as_alice, alice, agent):
    set_fact(user=alice, agent=agent, key="home_city", value="Grenoble", actor=FactActor.USER)
    exported = as_alice.get("/agents-api/memory/export", {"agent": agent.pk}).json()
    set_fact(user=alice, agent=agent, key="home_city", value="Paris", actor=FactActor.USER)
    exported["facts"]["bike"] = "gravel"  # one new fact in the file

    response = _import(as_alice, agent, exported)

    assert response.status_code == 200, response.content
    report = response.json()
    assert read_facts(user=alice, agent=agent)["home_city"] == "Paris"
    assert read_facts(user=alice, agent=agent)["bike"] == "gravel"
    assert (report["facts_added"], report["facts_changed"]) == (["bike"], [])
    assert report["facts_skipped"] == ["home_city"]


def test_a_file_exported_after_the_fact_changed_changes_it(as_alice, alice, agent):
    set_fact(user=alice, agent=agent, key="home_city", value="Grenoble", actor=FactActor.USER)
    exported = as_alice.get("/agents-api/memory/export", {"agent": agent.pk}).json()
    exported["facts"]["home_city"] = "Lyon"
    report = _import(as_alice, agent, exported).json()
    assert report["facts_changed"] == ["home_city"]
    assert read_facts(user=alice, agent=agent)["home_city"] == "Lyon"


def test_a_file_without_a_date_never_overwrites_a_fact(as_alice, alice, agent):
    set_fact(user=alice, agent=agent, key="home_city", value="Paris", actor=FactActor.USER)
    document = {"format": "driftless.memory", "version": 1, "facts": {"home_city": "Grenoble"}}
    report = _import(as_alice, agent, document).json()
    assert report["facts_skipped"] == ["home_city"]
    assert read_facts(user=alice, agent=agent)["home_city"] == "Paris"


def test_the_preview_check_refuses_a_wrong_shaped_document_and_changes_nothing(
    as_alice, alice, agent
):
    for wrong in ({"hello": "world"}, {"format": "driftless.memory", "version": 1, "facts": []}):
        response = _import(as_alice, agent, wrong, check=1)
        assert response.status_code == 400, response.content
    good = {"format": "driftless.memory", "version": 1, "facts": {"bike": "gravel"}}
    assert _import(as_alice, agent, good, check=1).json() == {"ok": True}
    assert read_facts(user=alice, agent=agent) == {}


# Issue 45, item 8: the page's export is streamed as it is read, and throttled.


@pytest.mark.parametrize("whole", ["true", "false"])
def test_the_pages_export_is_streamed_and_the_same_document(
    client, alice, agent, remembered, whole
):
    client.force_login(alice)
    response = client.get("/data/export", {"agent": agent.pk, "sessions": whole})
    assert response.status_code == 200 and response.streaming
    document = json.loads(b"".join(response.streaming_content))
    expected = export_memory(user=alice, agent=agent, include_sessions=whole == "true")
    assert undated(document) == undated(expected)


@override_settings(
    REST_FRAMEWORK={
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": "60/minute", "user": "600/minute", "export": "3/minute"},
    }
)
def test_exports_are_throttled_on_the_page_and_the_api(client, alice, agent):
    from django.core.cache import cache

    cache.clear()
    client.force_login(alice)
    page = [client.get("/data/export", {"agent": agent.pk}).status_code for _ in range(5)]
    assert page == [200, 200, 200, 429, 429]
    assert client.get("/agents-api/memory/export", {"agent": agent.pk}).status_code == 429
