"""Dates where the model can use them, without breaking the cache (issue 22).

Each memory entry and earlier topic carries the day(s) of its conversation, each fact the
day it was last set, all from stored timestamps; today's date is in the volatile suffix
only, so the stable prefix stays byte-identical across the turns of a day, whatever the
clock says within it.
"""

from datetime import UTC, datetime
from unittest import mock

from memory.actions.context import assemble_context
from memory.actions.turn import do_send_message
from memory.models import ImportantInfo, Message, Session, Topic
from memory.stores.facts import set_fact
from tests.memory_builders import add_topic


def at(day: str, clock: str = "12:00") -> datetime:
    return datetime.fromisoformat(f"{day}T{clock}:00").replace(tzinfo=UTC)


def date_messages(topic: Topic, *days: str) -> None:
    """Give the topic's messages, in order, these days (the last one for the rest)."""
    for index, message in enumerate(Message.objects.filter(topic=topic).order_by("seq")):
        message.created_at = at(days[min(index, len(days) - 1)])
        message.save(update_fields=["created_at"])


def test_each_memory_entry_earlier_topic_and_fact_carries_its_day(session, alice, agent):
    earlier = Session.objects.start(user=alice, agent=agent)
    hotel = add_topic(
        earlier, title="Hotel", summary="Booked Ryokan Sakura.", keep=True, messages=2
    )
    flight = add_topic(earlier, title="Flight", summary="Booked JL 407.", keep=True, messages=4)
    reversed_ = add_topic(earlier, title="Osaka", deprecated=True, messages=2)
    date_messages(hotel, "2026-03-02")
    date_messages(flight, "2026-03-05", "2026-03-05", "2026-03-07")
    date_messages(reversed_, "2026-02-20")
    prior = add_topic(session, title="Packing", summary="Light bag.", messages=2)
    date_messages(prior, "2026-03-08")
    with mock.patch("django.utils.timezone.now", return_value=at("2026-02-14", "09:30")):
        set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")
    # A fact stored before facts recorded when they were set shows no day, and no error.
    document = ImportantInfo.objects.get(user=alice, agent=agent)
    document.data = {**document.data, "pet": "cat"}
    document.save(update_fields=["data"])

    stack = assemble_context(session=session, today=at("2026-03-09").date())

    stable = stack.messages[0]["content"].splitlines()
    assert f"2026-03-02 [#{hotel.pk}] Hotel: Booked Ryokan Sakura." in stable
    assert f"2026-03-05 to 2026-03-07 [#{flight.pk}] Flight: Booked JL 407." in stable
    assert f"2026-02-20 [#{reversed_.pk}] [DEPRECATED] Osaka" in stable
    assert "- city (set 2026-02-14): Lyon" in stable
    assert "- pet: cat" in stable
    semi = stack.messages[1]["content"].splitlines()
    assert f"- 2026-03-08 [#{prior.pk}] Packing: Light bag." in semi
    assert stack.messages[2] == {
        "role": "system",
        "content": "Today's date: 2026-03-09 (Monday).",
    }


def test_a_topic_without_messages_carries_the_day_it_was_made(session):
    topic = add_topic(session, title="Idea", summary="Paint the door.")
    Topic.objects.filter(pk=topic.pk).update(created_at=at("2025-12-31"))

    semi = assemble_context(session=session).messages[1]["content"]

    assert f"- 2025-12-31 [#{topic.pk}] Idea: Paint the door." in semi.splitlines()


def turn_at(session, moment: datetime, text: str) -> None:
    with mock.patch("django.utils.timezone.now", return_value=moment):
        do_send_message(session=session, content=text)


def test_the_stable_prefix_is_byte_identical_across_a_day_while_the_suffix_carries_the_date(
    session, alice, agent, fake_openai
):
    earlier = Session.objects.start(user=alice, agent=agent)
    hotel = add_topic(
        earlier, title="Hotel", summary="Booked Ryokan Sakura.", keep=True, messages=2
    )
    date_messages(hotel, "2026-03-02")
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")

    for clock in ("00:00", "08:15", "13:30", "23:59"):
        turn_at(session, at("2026-03-09", clock), f"Question at {clock}")
    turn_at(session, at("2026-03-10", "07:00"), "The next morning")

    requests = fake_openai.requests
    assert len(requests) == 5
    prefixes = {request["messages"][0]["content"].encode("utf-8") for request in requests}
    assert len(prefixes) == 1  # the same bytes every turn, across midnight too
    [prefix] = prefixes
    assert b"2026-03-09" not in prefix and b"2026-03-10" not in prefix
    assert b"2026-03-02 [#" in prefix
    dates = [request["messages"][1]["content"] for request in requests]
    assert dates == ["Today's date: 2026-03-09 (Monday)."] * 4 + [
        "Today's date: 2026-03-10 (Tuesday)."
    ]
    # Within the day each request extends the one before it, the date included.
    for before, after in zip(requests[:3], requests[1:4], strict=True):
        assert after["messages"][: len(before["messages"])] == before["messages"]
    # The date is nowhere but in its own message.
    for request in requests:
        rest = [m for m in request["messages"][2:] if m["role"] == "system"]
        assert all("Today's date" not in m["content"] for m in rest)


def test_the_inspector_shows_the_date_in_the_volatile_layer(session, as_alice):
    with mock.patch("django.utils.timezone.now", return_value=at("2026-03-09", "18:00")):
        data = as_alice.get(f"/agents-api/sessions/{session.pk}/context").json()

    volatile = next(layer for layer in data["layers"] if layer["name"] == "volatile")
    assert volatile["parts"][0] == {
        "name": "date",
        "text": "Today's date: 2026-03-09 (Monday).",
        "tokens": 9,
    }
    for layer in data["layers"]:
        if layer["name"] != "volatile":
            assert all("Today's date" not in part["text"] for part in layer["parts"])
