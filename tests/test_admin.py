"""Operators can open every admin page, search and filter, on real data."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model

from memory.actions.context import assemble_context
from memory.actions.deletion import do_delete_session
from memory.models import ConsolidationRun, ImportantInfo, MemoryDecision, Notes, Session, Topic
from memory.stores.persistent import get_persistent_memory
from tests.memory_builders import add_topic


@pytest.fixture
def operator(client, db):
    user = get_user_model().objects.create_superuser("operator", "op@example.com", "pw")
    client.force_login(user)
    return user


@pytest.fixture
def history(session, alice):
    topic = session.active_topic()
    session.append_message(role="user", content="We chose PostgreSQL for the ledger.")
    session.append_message(role="assistant", content="Noted.", prompt_tokens=100, cached_tokens=60)
    Notes.objects.create(topic=topic, content="decision: postgres")
    ImportantInfo.objects.create(
        user=alice, agent=session.agent, organization=session.organization, data={"db": "pg"}
    )
    MemoryDecision.objects.create(topic=topic, actor="user", from_state="none", to_state="promoted")
    ConsolidationRun.objects.create(
        agent=session.agent, user=alice, organization=session.organization
    )
    gone = Session.objects.start(user=alice, agent=session.agent)
    do_delete_session(session=gone, deleted_by=alice)
    return topic


def test_every_changelist_opens_with_data(client, operator, history):
    for model in admin.site._registry:
        if model._meta.app_label != "memory":
            continue
        url = f"/admin/memory/{model._meta.model_name}/"
        assert client.get(url).status_code == 200, url


def test_topic_page_shows_its_messages_and_notes(client, operator, history):
    page = client.get(f"/admin/memory/topic/{history.pk}/change/").content.decode()
    assert "We chose PostgreSQL for the ledger." in page
    assert "decision: postgres" in page


def test_search_finds_message_content_and_filters_by_memory_state(client, operator, history):
    found = client.get("/admin/memory/topic/", {"q": "ledger"}).content.decode()
    assert f"/admin/memory/topic/{history.pk}/change/" in found
    promoted = client.get("/admin/memory/topic/", {"memory_state": "promoted"}).content.decode()
    assert f"/admin/memory/topic/{history.pk}/change/" not in promoted


def test_session_page_shows_cache_hits(client, operator, history):
    page = client.get(f"/admin/memory/session/{history.session_id}/change/").content.decode()
    assert "60 / 100 (60%)" in page


def test_a_non_staff_user_is_refused_by_the_admin(client, alice, history):
    client.force_login(alice)
    for url in ("/admin/", "/admin/memory/topic/", f"/admin/memory/topic/{history.pk}/change/"):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url


def test_every_change_page_opens_for_a_superuser(client, operator, history):
    from memory.models import ModelEndpoint

    ModelEndpoint.objects.create(name="Local", base_url="http://127.0.0.1:9/v1", model_names="m")
    for model in admin.site._registry:
        if model._meta.app_label != "memory":
            continue
        obj = model.objects.first()
        assert obj is not None, model
        url = f"/admin/memory/{model._meta.model_name}/{obj.pk}/change/"
        assert client.get(url).status_code == 200, url


# --- deleting: the active topic is refused, any deletion invalidates memory ---------------


def page_messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_the_active_topic_cannot_be_deleted_and_the_session_keeps_working(
    client, operator, history
):
    page = client.get(f"/admin/memory/topic/{history.pk}/change/").content.decode()
    assert f"/admin/memory/topic/{history.pk}/delete/" not in page  # no Delete link

    for method in (client.get, client.post):
        response = method(f"/admin/memory/topic/{history.pk}/delete/", {"post": "yes"}, follow=True)
        assert response.redirect_chain[0] == (f"/admin/memory/topic/{history.pk}/change/", 302)
        (message,) = page_messages(response)
        assert "the active topic cannot be deleted; start a new topic first" in message

    history.refresh_from_db()
    assert history.is_active
    session = history.session
    assert session.append_message(role="user", content="still works").topic_id == history.pk
    assert assemble_context(session=session).messages[-1]["content"] == "still works"


def test_a_bulk_delete_that_includes_an_active_topic_deletes_nothing(
    client, operator, history, agent, alice
):
    other = add_topic(history.session, title="Earlier", summary="Old.")
    response = client.post(
        "/admin/memory/topic/",
        {"action": "delete_selected", "_selected_action": [history.pk, other.pk], "post": "yes"},
        follow=True,
    )

    assert any("the active topic cannot be deleted" in m for m in page_messages(response))
    assert Topic.objects.filter(pk__in=[history.pk, other.pk]).count() == 2


def test_deleting_earlier_topics_in_bulk_invalidates_their_scope(
    client, operator, history, agent, alice
):
    earlier = Session.objects.start(user=alice, agent=agent)
    kept = add_topic(earlier, title="Billing", summary="Stripe.", keep=True)
    chatter = add_topic(earlier, title="Chatter", summary="Small talk.")
    reader = history.session
    assert "Billing: Stripe." in get_persistent_memory(session=reader).text  # now cached

    response = client.post(
        "/admin/memory/topic/",
        {"action": "delete_selected", "_selected_action": [kept.pk, chatter.pk], "post": "yes"},
    )

    assert response.status_code == 302
    assert not Topic.objects.filter(pk__in=[kept.pk, chatter.pk]).exists()
    assert get_persistent_memory(session=reader).text == ""


@pytest.mark.parametrize("how", ["delete-view", "bulk-action"])
def test_deleting_a_session_invalidates_the_memory_of_its_scope(
    client, operator, history, agent, alice, how
):
    earlier = Session.objects.start(user=alice, agent=agent)
    add_topic(earlier, title="Billing", summary="Stripe.", keep=True)
    reader = history.session
    assert "Billing: Stripe." in get_persistent_memory(session=reader).text  # now cached

    if how == "delete-view":
        response = client.post(f"/admin/memory/session/{earlier.pk}/delete/", {"post": "yes"})
    else:
        response = client.post(
            "/admin/memory/session/",
            {"action": "delete_selected", "_selected_action": [earlier.pk], "post": "yes"},
        )

    assert response.status_code == 302
    assert not Session.objects.filter(pk=earlier.pk).exists()
    assert get_persistent_memory(session=reader).text == ""
