"""Sessions keep a stable name (issue 24): the user's rename, else the first topic's
title; a fork never renames a session after its newest topic. The delete page and its
notice use that name, never "Session 1"."""

from django.test import Client

from memory.models import Message, Topic


def named(client, session) -> str:
    page = client.get("/").content.decode()
    marker = f'data-session-id="{session.pk}" data-name="'
    return page.split(marker, 1)[1].split('"', 1)[0]


def test_a_fork_keeps_the_sessions_name_from_its_first_topic(db, session):
    first = session.active_topic()
    Topic.objects.filter(pk=first.pk).update(title="Japan in April")
    client = Client()
    client.force_login(session.user)
    assert named(client, session) == "Japan in April"

    Topic.objects.filter(pk=first.pk).update(is_active=False)
    Topic.objects.create(
        session=session, origin=Topic.Origin.DRIFT, title="Completely different thing: a tap"
    )
    assert named(client, session) == "Japan in April"

    session.title = "Our trip"
    session.save(update_fields=["title"])
    assert named(client, session) == "Our trip"


def test_the_delete_page_and_its_notice_use_the_shown_name(db, session):
    Topic.objects.filter(pk=session.active_topic().pk).update(title="Leaking tap")
    session.append_message(role=Message.Role.USER, content="It drips")
    client = Client()
    client.force_login(session.user)
    page = client.get(f"/sessions/{session.pk}/delete/").content.decode()
    assert "Delete “Leaking tap”?" in page and "Session " not in page

    done = client.post(f"/sessions/{session.pk}/delete/", follow=True).content.decode()
    assert "“Leaking tap” was deleted permanently." in done


def test_search_results_say_which_session_and_when(db, alice, agent):
    from memory.models import Session

    for name in ("Lisbon, May", "Porto, June"):
        found = Session.objects.start(user=alice, agent=agent, title=name)
        Topic.objects.filter(pk=found.active_topic().pk).update(title="Trip plan")
        found.append_message(role=Message.Role.USER, content="Book the trains for the trip")
    client = Client()
    client.force_login(alice)
    page = client.get("/search/", {"q": "trains"}).content.decode()
    assert page.count('class="hit-where"') == 2
    assert "in “Lisbon, May” · <time" in page and "in “Porto, June” · <time" in page
