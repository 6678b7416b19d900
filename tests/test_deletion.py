"""Deleting sessions and topics: permanent, out of memory at once, audited without content."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory.actions.context import assemble_context
from memory.actions.curation import do_user_curation
from memory.lib.errors import ACTIVE_TOPIC_DELETE_ERROR
from memory.models import Deletion, MemoryDecision, MemoryState, Message, Notes, Session, Topic
from memory.stores.leases import session_lock
from tests.memory_builders import add_messages, add_topic


@pytest.fixture
def doomed(alice, agent):
    """A session of alice's holding a promoted topic (with notes and a curation trail)."""
    doomed = Session.objects.start(user=alice, agent=agent)
    topic = add_topic(doomed, title="Secret plan", summary="Launch on Mars.", messages=4)
    do_user_curation(topic=topic, state=MemoryState.PROMOTED, user=alice)
    Notes.objects.create(topic=topic, content="private scratch", archived=True)
    add_messages(doomed, 2)
    return doomed


def stable(session):
    return assemble_context(session=session).layer("stable").text


def row_text(record: Deletion) -> str:
    return " ".join(str(value) for value in Deletion.objects.filter(pk=record.pk).values().get())


def test_a_deleted_sessions_promoted_topic_leaves_every_other_sessions_next_context(
    as_alice, session, doomed
):
    assert "Launch on Mars." in stable(session)  # and now cached for the scope

    answer = as_alice.delete(f"/agents-api/sessions/{doomed.pk}/")

    assert answer.status_code == 204
    assert not Session.objects.filter(pk=doomed.pk).exists()
    assert not Message.objects.filter(session_id=doomed.pk).exists()
    assert "Launch on Mars." not in stable(session) and "Secret plan" not in stable(session)


def test_an_audit_row_remains_without_the_content(as_alice, alice, doomed):
    topic_id = doomed.topics.get(title="Secret plan").pk
    as_alice.delete(f"/agents-api/sessions/{doomed.pk}/")

    record = Deletion.objects.get()
    assert (record.kind, record.via, record.session_ref, record.deleted_by) == (
        "session",
        "user",
        doomed.pk,
        alice,
    )
    assert (record.topics, record.messages, record.memory_topics) == (2, 6, 1)
    assert "Secret" not in row_text(record) and "Mars" not in row_text(record)
    trail = MemoryDecision.objects.get()  # the curation trail stays, without the title
    assert (trail.topic, trail.topic_title, trail.to_state) == (None, "", "promoted")
    assert not Topic.objects.filter(pk=topic_id).exists()


def test_a_stranger_cannot_delete_a_session_or_a_topic(as_bob, doomed):
    topic = doomed.topics.get(title="Secret plan")
    assert as_bob.delete(f"/agents-api/sessions/{doomed.pk}/").status_code == 404
    assert as_bob.delete(f"/agents-api/topics/{topic.pk}").status_code == 404
    assert as_bob.get(f"/sessions/{doomed.pk}/delete/").status_code == 404
    assert as_bob.post(f"/sessions/{doomed.pk}/delete/").status_code == 404
    assert Session.objects.filter(pk=doomed.pk).exists() and Topic.objects.filter(pk=topic.pk)
    assert not Deletion.objects.exists()


def test_a_session_is_not_deleted_in_the_middle_of_a_turn(as_alice, doomed):
    with session_lock(doomed.pk):
        answer = as_alice.delete(f"/agents-api/sessions/{doomed.pk}/")
    assert answer.status_code == 409
    assert Session.objects.filter(pk=doomed.pk).exists() and not Deletion.objects.exists()


def test_the_user_deletes_an_earlier_topic_and_it_leaves_memory(as_alice, session, doomed):
    topic = doomed.topics.get(title="Secret plan")
    assert "Launch on Mars." in stable(session)

    answer = as_alice.delete(f"/agents-api/topics/{topic.pk}")

    assert answer.status_code == 204
    assert not Topic.objects.filter(pk=topic.pk).exists()
    assert not Message.objects.filter(topic_id=topic.pk).exists()
    assert not Notes.objects.filter(topic_id=topic.pk).exists()
    assert Session.objects.filter(pk=doomed.pk).exists()
    assert "Launch on Mars." not in stable(session)
    record = Deletion.objects.get()
    assert (record.kind, record.topic_ref, record.topics, record.messages) == (
        "topic",
        topic.pk,
        1,
        4,
    )


def test_the_active_topic_cannot_be_deleted(as_alice, session):
    topic = session.active_topic()
    answer = as_alice.delete(f"/agents-api/topics/{topic.pk}")
    assert answer.status_code == 409
    assert answer.json() == {"detail": ACTIVE_TOPIC_DELETE_ERROR, "code": "active_topic"}
    assert Topic.objects.filter(pk=topic.pk, is_active=True).exists()
    assert not Deletion.objects.exists()


def test_the_page_asks_first_and_says_it_is_permanent(as_alice, doomed):
    page = as_alice.get(f"/sessions/{doomed.pk}/delete/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "permanently" in text and "cannot be undone" in text
    assert "1 of its topics is in" in text
    assert Session.objects.filter(pk=doomed.pk).exists()  # asking deletes nothing

    done = as_alice.post(f"/sessions/{doomed.pk}/delete/", follow=True)

    assert done.redirect_chain[-1][0] == "/"
    assert "was deleted permanently" in done.content.decode()
    assert not Session.objects.filter(pk=doomed.pk).exists()
    assert Deletion.objects.get().via == "user"


def test_the_sessions_page_offers_a_delete_link_per_session(as_alice, doomed, session):
    page = as_alice.get("/").content.decode()
    assert f'href="/sessions/{doomed.pk}/delete/"' in page
    assert f'href="/sessions/{session.pk}/delete/"' in page


@pytest.fixture
def as_operator(db):
    operator = get_user_model().objects.create_superuser("operator", "op@example.com", "pw")
    client = Client()
    client.force_login(operator)
    return client, operator


def test_an_operator_deleting_in_admin_leaves_an_audit_row_and_memory(as_operator, session, doomed):
    client, operator = as_operator
    assert "Launch on Mars." in stable(session)
    answer = client.post(f"/admin/memory/session/{doomed.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302
    assert not Session.objects.filter(pk=doomed.pk).exists()
    record = Deletion.objects.get()
    assert (record.via, record.deleted_by, record.memory_topics) == ("operator", operator, 1)
    assert "Launch on Mars." not in stable(session)


def test_admin_deletes_an_earlier_topic_but_never_the_active_one(as_operator, session, doomed):
    client, _ = as_operator
    earlier = doomed.topics.get(title="Secret plan")
    active = doomed.active_topic()
    refused = client.post(f"/admin/memory/topic/{active.pk}/delete/", {"post": "yes"})
    assert refused.status_code == 302 and refused["Location"].endswith(f"/{active.pk}/change/")
    both = {"action": "delete_selected", "_selected_action": [earlier.pk, active.pk]}
    client.post("/admin/memory/topic/", {**both, "post": "yes"})
    assert Topic.objects.filter(pk__in=[earlier.pk, active.pk]).count() == 2  # refused whole
    only_earlier = {"action": "delete_selected", "_selected_action": [earlier.pk], "post": "yes"}
    assert client.post("/admin/memory/topic/", only_earlier).status_code == 302
    assert Topic.objects.filter(pk=active.pk).exists()
    assert not Topic.objects.filter(pk=earlier.pk).exists()
    assert list(Deletion.objects.values_list("kind", "topic_ref")) == [("topic", earlier.pk)]
    assert "Launch on Mars." not in stable(session)
