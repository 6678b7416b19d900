""" "Why do you remember this?": what the memory panel, the facts panel and the run list
are told about each entry's source (memory/stores/memory_sources.py).

Consolidation runs through REST with the scripted fake provider, as in
tests/test_consolidation.py; a stranger (bob, same organization; charlie, none) never sees
alice's runs, topics or their ids.
"""

import json

import pytest

from memory.models import FactActor, MemoryDecision, Session, Topic
from memory.stores.facts import set_fact
from tests.conftest import logged_in
from tests.memory_builders import add_topic

CONSOLIDATE = "/agents-api/memory/consolidate?agent={agent}"
RUNS = "/agents-api/memory/consolidations?agent={agent}"
UNDO = "/agents-api/memory/consolidations/{run}/undo"
MEMORY = "/agents-api/sessions/{session}/memory"
FACTS = "/agents-api/sessions/{session}/facts"


@pytest.fixture
def entries(session):
    """A subject twice, a decision and its reversal."""
    return {
        name: add_topic(session, title=title, summary=summary, keep=True, age_days=age, messages=2)
        for name, title, summary, age in [
            ("ledger", "Ledger storage", "Ledger on PostgreSQL.", 30),
            ("again", "Ledger database", "The ledger moves to version 16 of the database.", 20),
            ("lisbon", "Offsite city", "We chose Lisbon.", 15),
            ("porto", "Offsite moved", "We switched to Porto.", 5),
        ]
    }


def merge_and_supersede(fake_openai, entries):
    e = entries
    fake_openai.propose(
        {
            "op": "merge",
            "ids": [e["ledger"].pk, e["again"].pk],
            "title": "Ledger",
            "summary": "Ledger on PostgreSQL 16.",
        },
        {"op": "supersede", "old": e["lisbon"].pk, "new": e["porto"].pk},
        # Porto by the ledger: the ledger was not shown in the offsite's call, refused.
        {"op": "supersede", "old": e["porto"].pk, "new": e["again"].pk},
    )


def scope_entries(client, session) -> dict[int, dict]:
    response = client.get(MEMORY.format(session=session.pk))
    assert response.status_code == 200, response.content
    block = response.json()["scope"]
    return {entry["topic_id"]: entry for entry in block["entries"] + block["dropped"]}


def ref(topic) -> dict:
    topic = Topic.objects.get(pk=topic.pk)
    return {"topic_id": topic.pk, "session_id": topic.session_id, "title": topic.title}


def test_a_merged_entry_says_what_it_was_merged_from_and_a_superseded_one_its_successor(
    as_alice, fake_openai, agent, session, entries
):
    e = entries
    merge_and_supersede(fake_openai, e)
    run = as_alice.post(CONSOLIDATE.format(agent=agent.pk)).json()
    assert run["status"] == "applied"

    shown = scope_entries(as_alice, session)

    merged = shown[e["again"].pk]
    assert merged["merged_from"] == [ref(e["ledger"]), ref(e["again"])]
    assert merged["consolidation"] == run["id"] and merged["superseded_by"] is None
    assert e["ledger"].pk not in shown  # merged away: out of memory
    old = shown[e["lisbon"].pk]
    assert old["deprecated"] and old["superseded_by"] == ref(e["porto"])
    assert old["consolidation"] == run["id"] and old["decided_by"] == "consolidator"
    untouched = shown[e["porto"].pk]
    assert (untouched["merged_from"], untouched["superseded_by"]) == ([], None)
    assert untouched["consolidation"] is None and untouched["decided_by"] is None


def test_the_run_says_what_it_did_and_refused_with_the_topics_as_links(
    as_alice, fake_openai, agent, session, entries
):
    e = entries
    merge_and_supersede(fake_openai, e)
    run = as_alice.post(CONSOLIDATE.format(agent=agent.pk)).json()

    merge, supersede, refused = run["operations"]
    assert (run["status_text"], run["trigger_text"]) == ("Applied", "The user (REST)")

    assert merge == {
        "op": "merge",
        "applied": True,
        "reason": "",
        "by": "model",
        "into": ref(e["again"]),
        "sources": [ref(e["ledger"])],
    }
    assert supersede == {
        "op": "supersede",
        "applied": True,
        "reason": "",
        "old": ref(e["lisbon"]),
        "new": ref(e["porto"]),
    }
    assert refused == {
        "op": "unusable",
        "applied": False,
        "reason": f"operation 2 names an entry that was not shown: {e['again'].pk}",
        "proposed": json.dumps({"op": "supersede", "old": e["porto"].pk, "new": e["again"].pk}),
    }
    (listed,) = as_alice.get(RUNS.format(agent=agent.pk)).json()
    assert listed["operations"] == run["operations"]


def test_after_undo_no_entry_says_it_was_merged_or_superseded(
    as_alice, fake_openai, agent, session, entries
):
    merge_and_supersede(fake_openai, entries)
    run = as_alice.post(CONSOLIDATE.format(agent=agent.pk)).json()

    assert as_alice.post(UNDO.format(run=run["id"])).status_code == 200

    shown = scope_entries(as_alice, session)
    assert set(shown) == {topic.pk for topic in entries.values()}
    assert all(
        not entry["merged_from"] and entry["superseded_by"] is None for entry in shown.values()
    )
    assert all(entry["consolidation"] is None for entry in shown.values())
    assert not shown[entries["lisbon"].pk]["deprecated"]


def test_an_entry_says_who_put_it_in_memory_and_when(as_alice, session, entries):
    topic = entries["porto"]
    MemoryDecision.objects.create(
        topic=topic,
        topic_title=topic.title,
        actor="summarizer",
        from_state="none",
        to_state="promoted",
    )
    MemoryDecision.objects.create(
        topic=topic, topic_title=topic.title, actor="agent", from_state="none", to_state="promoted"
    )
    MemoryDecision.objects.create(  # an edit is not a decision to keep it
        topic=topic,
        topic_title=topic.title,
        actor="user",
        action="edit",
        from_state="promoted",
        to_state="promoted",
    )

    entry = scope_entries(as_alice, session)[topic.pk]

    assert entry["decided_by"] == "agent" and entry["decided_at"].endswith("Z")
    assert entry["days"] and entry["clipped"] is False


def test_an_entry_the_budget_drops_is_listed_as_dropped_with_its_sources(
    as_alice, fake_openai, agent, session, entries
):
    merge_and_supersede(fake_openai, entries)
    as_alice.post(CONSOLIDATE.format(agent=agent.pk))
    agent.memory_token_budget = 30  # room for the newest entry or so
    agent.save()

    block = as_alice.get(MEMORY.format(session=session.pk)).json()["scope"]

    assert block["dropped"], block
    dropped = {entry["topic_id"]: entry for entry in block["dropped"]}
    merged = dropped[entries["again"].pk]  # the oldest entry left
    assert merged["merged_from"] == [ref(entries["ledger"]), ref(entries["again"])]


def test_a_fact_links_to_the_topic_that_set_it(as_alice, alice, agent, session, entries):
    topic = entries["porto"]
    set_fact(
        user=alice, agent=agent, key="city", value="Porto", actor=FactActor.AGENT, topic_id=topic.pk
    )
    set_fact(user=alice, agent=agent, key="name", value="Alice", actor=FactActor.USER)

    facts = as_alice.get(FACTS.format(session=session.pk)).json()
    detail = as_alice.get(FACTS.format(session=session.pk) + "/city").json()

    assert facts["provenance"]["city"]["topic"] == ref(topic)
    assert facts["provenance"]["city"]["actor"] == "agent"
    assert facts["provenance"]["name"]["topic"] is None
    assert detail["provenance"]["topic"] == ref(topic)
    topic.delete()
    gone = as_alice.get(FACTS.format(session=session.pk)).json()["provenance"]["city"]
    assert gone["topic"] is None


# --- strangers -----------------------------------------------------------------------------


def test_a_stranger_sees_none_of_anothers_runs_topics_or_their_ids(
    as_alice, fake_openai, alice, bob, charlie, agent, session, entries
):
    merge_and_supersede(fake_openai, entries)
    run = as_alice.post(CONSOLIDATE.format(agent=agent.pk)).json()
    set_fact(
        user=alice,
        agent=agent,
        key="city",
        value="Porto",
        actor=FactActor.AGENT,
        topic_id=entries["porto"].pk,
    )
    as_bob = logged_in(bob)
    bobs_session = Session.objects.start(user=bob, agent=agent)
    add_topic(bobs_session, title="Bob's own", summary="Bob's entry.", keep=True, messages=2)

    answers = [
        as_bob.get(MEMORY.format(session=bobs_session.pk)),
        as_bob.get(FACTS.format(session=bobs_session.pk)),
        as_bob.get(RUNS.format(agent=agent.pk)),
    ]

    text = json.dumps([answer.json() for answer in answers])
    alices_ids = [topic.pk for topic in entries.values()]
    assert all(answer.status_code == 200 for answer in answers)
    assert not any(f'"topic_id": {pk},' in text for pk in alices_ids)
    assert "Bob's own" in text  # what he does see is his
    assert "Ledger" not in text and "Offsite" not in text and "Porto" not in text
    assert as_bob.get(MEMORY.format(session=session.pk)).status_code == 404
    assert as_bob.post(UNDO.format(run=run["id"])).status_code == 404
    assert logged_in(charlie).post(UNDO.format(run=run["id"])).status_code == 404
    assert as_alice.get(RUNS.format(agent=agent.pk)).json()[0]["undoable"] is True


def test_the_context_inspector_links_each_entry_and_lists_the_dropped_ones(
    as_alice, fake_openai, alice, agent, entries
):
    merge_and_supersede(fake_openai, entries)
    as_alice.post(CONSOLIDATE.format(agent=agent.pk))
    agent.memory_token_budget = 30
    agent.save()
    reader = Session.objects.start(user=alice, agent=agent)  # sees every entry from memory

    context = as_alice.get(f"/agents-api/sessions/{reader.pk}/context").json()

    sources = context["memory_sources"]
    kept = [entry["title"] for entry in sources["kept"]]
    dropped = {entry["topic_id"]: entry for entry in sources["dropped"]}
    assert [entry["title"] for entry in sources["dropped"]] == context["dropped"]
    assert kept and all(title not in context["dropped"] for title in kept)
    merged = dropped[entries["again"].pk]
    assert merged["session_id"] == entries["again"].session_id
    assert [ref["topic_id"] for ref in merged["merged_from"]] == [
        entries["ledger"].pk,
        entries["again"].pk,
    ]


def test_an_entry_merged_twice_is_merged_from_every_topic_and_superseded_only_while_deprecated(
    as_alice, fake_openai, agent, session, entries
):
    e = entries
    merge_and_supersede(fake_openai, e)
    as_alice.post(CONSOLIDATE.format(agent=agent.pk))
    backups = add_topic(
        session,
        title="Ledger backups",
        summary="Ledger on PostgreSQL 16, backed up nightly.",
        keep=True,
        age_days=1,
        messages=2,
    )
    fake_openai.propose(
        {
            "op": "merge",
            "ids": [e["again"].pk, backups.pk],
            "title": "Ledger",
            "summary": "Ledger on PostgreSQL 16, backed up nightly.",
        },
    )
    second = as_alice.post(CONSOLIDATE.format(agent=agent.pk)).json()
    assert second["status"] == "applied", second
    taken_back = as_alice.put(
        f"/agents-api/topics/{e['lisbon'].pk}/memory",
        {"state": "promoted"},
        content_type="application/json",
    )
    assert taken_back.status_code == 200, taken_back.content

    shown = scope_entries(as_alice, session)

    newest = shown[backups.pk]
    assert [ref["topic_id"] for ref in newest["merged_from"]] == [
        e["ledger"].pk,
        e["again"].pk,
        backups.pk,
    ]
    assert newest["consolidation"] == second["id"]
    # Taken back by the user (no longer deprecated): it no longer says it was superseded.
    taken = shown[e["lisbon"].pk]
    assert taken["superseded_by"] is None and taken["decided_by"] == "user"


def test_a_fact_operation_is_listed_in_words_and_leaves_the_entries_sources_alone(
    as_alice, alice, agent, fake_openai, session, entries
):
    set_fact(user=alice, agent=agent, key="offsite_city", value="Lisbon", actor=FactActor.AGENT)
    fake_openai.propose({"op": "fact", "key": "offsite_city", "value": "Porto", "outdated": False})
    run = as_alice.post(CONSOLIDATE.format(agent=agent.pk)).json()
    assert run["status"] == "applied", run

    (fact,) = run["operations"]
    assert fact == {
        "op": "fact",
        "applied": True,
        "reason": "",
        "key": "offsite_city",
        "value": "Porto",
        "outdated": False,
    }
    shown = scope_entries(as_alice, session)
    assert all(entry["consolidation"] is None for entry in shown.values())
