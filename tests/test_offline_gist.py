"""The offline model shows the product (issue 24): model-free titles and summaries that
read like a person wrote them, from the user's salient sentences, not the first message cut.

The scene of the issue: six turns planning a trip to Japan, then six about a leaking tap
opened with "By the way", then the user leaves the page (the exit evaluation)."""

from __future__ import annotations

import pytest

from memory.actions.evaluation import evaluate_session
from memory.actions.summarize import generate_summary
from memory.actions.turn import do_send_message
from memory.lib.text import ELLIPSIS
from memory.llm import get_chat_model
from memory.llm.gist import gist, without_opener
from memory.models import Message, Topic
from tests.evaluation_helpers import join_background_evaluations

JAPAN = [
    "Help me plan a two-week trip to Japan in April. Which cities should I visit?",
    "Is the Japan Rail Pass still worth buying for Tokyo, Kyoto and Osaka?",
    "How many days should I spend in Kyoto to see the temples?",
    "Will the cherry blossoms still be out in Kyoto in mid April?",
    "I'll book ryokan stays in Kyoto, hotels in Tokyo. Is that a good split?",
    "What's the best way to get from Osaka to Hiroshima and Miyajima?",
]
TAP = [
    "By the way, our kitchen tap is dripping all night. It's a single-lever mixer, "
    "about ten years old, and the drip gets worse when the hot water runs.",
    "Do I need to replace the cartridge or the whole tap?",
    "How do I turn off the water under the sink before taking the tap apart?",
    "The cartridge has a brand name on it. Where can I buy a replacement?",
    "I'll replace the cartridge myself this weekend. What tools do I need for the tap?",
    "Should I call a plumber if the tap still drips after that?",
]


def assert_reads_like_a_person_wrote_it(title: str) -> None:
    assert title and "by the way" not in title.lower()
    assert not title.endswith((ELLIPSIS, "...")), title  # not a sentence cut off
    assert len(title) <= 60


@pytest.mark.django_db(transaction=True)
def test_the_japan_then_tap_scene_gives_two_topics_with_gist_titles_and_summaries(session):
    assert get_chat_model("summary").offline  # no model configured: the offline default
    for text in JAPAN + TAP:
        do_send_message(session=session, content=text)
    join_background_evaluations()
    evaluate_session(session_id=session.pk, reason="exit")  # leaving the page

    topics = list(Topic.objects.filter(session=session).order_by("pk"))
    assert len(topics) == 2
    japan, tap = topics
    assert list(japan.messages.filter(role="user").values_list("content", flat=True)) == JAPAN
    assert list(tap.messages.filter(role="user").values_list("content", flat=True)) == TAP
    for topic, subject in ((japan, "Japan"), (tap, "tap")):
        topic.refresh_from_db()
        assert_reads_like_a_person_wrote_it(topic.title)
        assert subject.lower() in topic.summary.lower(), topic.summary
        assert not topic.summary_is_fallback
        assert topic.keep_in_memory is False  # the offline model never promotes
        # Not the first message cut: the title is a whole sentence of the user's, and the
        # summary says more than the first message did.
        first = topic.messages.filter(role=Message.Role.USER).order_by("seq").first().content
        assert not first.startswith(topic.title) or topic.title in first.split(". ")[0]
        assert topic.summary.strip() != first.strip()
    _print_scene_for_the_note(session)
    assert "Japan" in japan.title and "tap" in tap.title.lower()
    assert "Kyoto" in japan.summary  # the salient places, in a parenthetical list
    assert "cartridge" in tap.summary  # and the decision about the cartridge
    assert "I'll replace the cartridge myself this weekend." in tap.summary


def test_openers_that_announce_a_new_subject_are_dropped():
    assert without_opener("By the way, our tap drips.") == "our tap drips."
    assert without_opener("Completely different thing: my tap drips") == "my tap drips"
    assert without_opener("Oh, by the way — anyway, the tap") == "the tap"
    assert without_opener("Кстати, у меня течёт смеситель") == "у меня течёт смеситель"
    assert without_opener("ところで、パソコンが遅い") == "パソコンが遅い"
    assert without_opener("Sonnenschein heute") == "Sonnenschein heute"  # "so" is not an opener


def test_a_title_is_never_a_cut_sentence_even_when_every_sentence_is_long():
    long = "x" * 10
    messages = [
        f"The quarterly budget spreadsheet for the marketing department {long} is broken",
        f"The quarterly budget spreadsheet formulas for the marketing department {long} fail",
    ]
    found = gist(messages)
    assert ELLIPSIS not in found.title and len(found.title) <= 60
    assert "budget" in found.title.lower() and "spreadsheet" in found.title.lower()


def test_unicode_conversations_get_a_gist_too():
    found = gist(
        [
            "Кстати, у меня на кухне течёт смеситель. Можно починить самому?",
            "Смеситель однорычажный, картридж старый.",
            "Где купить картридж для смесителя?",
        ]
    )
    assert "Кстати" not in found.title and "смеситель" in found.title.lower()
    assert "картридж" in found.summary.lower()


@pytest.mark.django_db
def test_a_refresh_keeps_the_title_and_builds_on_the_summary(session):
    for text in JAPAN[:3]:
        session.append_message(role=Message.Role.USER, content=text)
    topic = session.active_topic()
    first = generate_summary(messages=list(topic.messages.order_by("seq")), notes="")
    Topic.objects.filter(pk=topic.pk).update(
        title=first.title, summary=first.summary, summarized_through_seq=first.through_seq
    )
    for text in JAPAN[3:]:
        session.append_message(role=Message.Role.USER, content=text)
    topic.refresh_from_db()

    again = generate_summary(messages=list(topic.messages.order_by("seq")), notes="", topic=topic)

    assert again.title == first.title and not again.fallback
    assert "Japan" in again.summary and "ryokan" in again.summary.lower()


def _print_scene_for_the_note(session):  # pragma: no cover - a debugging aid
    for topic in Topic.objects.filter(session=session).order_by("pk"):
        print(repr(topic.title), "|", topic.summary)
