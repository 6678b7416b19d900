"""Operators can open every admin page, search and filter, on real data."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model

from memory.deletion import do_delete_session
from memory.models import ImportantInfo, MemoryDecision, Notes, Session


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
    for model in admin.site._registry:
        if model._meta.app_label != "memory":
            continue
        obj = model.objects.first()
        assert obj is not None, model
        url = f"/admin/memory/{model._meta.model_name}/{obj.pk}/change/"
        assert client.get(url).status_code == 200, url
