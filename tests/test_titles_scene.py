"""The scene of issue 46 through the product's fork loop, and titles that settle.

Kyoto, then a kitchen tap, then a laptop (16 messages, tests/scenes.py) forks twice in
English, French and German, checked at the heartbeat (message 10) and when the user leaves
(message 16), with the packaged sentence encoder and the offline model; a topic's title
changes only when its subject does (memory/actions/titles.py)."""

from __future__ import annotations

import pytest

from memory.actions.evaluation import evaluate_session
from memory.actions.summarize import do_summarize_topic
from memory.models import Topic
from memory.text.embeddings import use_encoder
from tests.evaluation_helpers import converse, summary_answer
from tests.scenes import KYOTO_LONG, KYOTO_TAP_LAPTOP


@pytest.fixture
def packaged_encoder():
    use_encoder("use")
    yield
    use_encoder(None)


def _topics(session):
    return list(Topic.objects.filter(session=session).order_by("pk"))


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_kyoto_tap_laptop_forks_twice(packaged_encoder, session, settings, lang):
    settings.DRIFT_DETECTOR = "auto"  # the default; with the offline model, model-free
    lines = KYOTO_TAP_LAPTOP[lang]
    converse(session, lines[:10])
    evaluate_session(session_id=session.pk, reason="heartbeat")
    converse(session, lines[10:])
    evaluate_session(session_id=session.pk, reason="exit")

    topics = _topics(session)
    firsts = [t.messages.order_by("seq").values_list("seq", flat=True).first() for t in topics]
    assert firsts == [1, 7, 11]
    laptop = topics[2]
    assert laptop.is_active and laptop.messages.order_by("seq").first().content == lines[10][1]
    opener = {"en": "Completely", "fr": "Tout autre", "de": "Etwas völlig"}[lang]
    assert not laptop.title.startswith(opener)  # a fork's label is its subject, not the opener


def _titles_while_talking(session, lines, every=2):
    """The topic's title after a summary every ``every`` messages (the drift check's
    refresh, without its detector: this is about titles)."""
    titles = []
    topic = session.active_topic()
    for end in range(every, len(lines) + 1, every):
        converse(session, lines[end - every : end])
        titles.append((end, do_summarize_topic(topic_id=topic.pk, reason="refresh").title))
    return titles


def _changes_after(titles, start):
    shown = [title for end, title in titles if end >= start]
    return sum(1 for a, b in zip(shown, shown[1:], strict=False) if a != b)


def test_a_long_topic_keeps_its_title_with_the_offline_model(packaged_encoder, session):
    titles = _titles_while_talking(session, KYOTO_LONG)
    assert _changes_after(titles, 6) <= 1, titles


def test_a_long_topic_keeps_its_title_when_the_model_renames_it(
    packaged_encoder, fake_openai, session, settings
):
    names = ["Kyoto trip in April", "Kyoto temples and ryokan", "Planning Kyoto sights"]
    for index in range(10):  # a model that names the same subject anew at every refresh
        fake_openai.reply_json(summary_answer(title=names[index % 3], summary="A Kyoto trip."))
    titles = _titles_while_talking(session, KYOTO_LONG)
    assert _changes_after(titles, 6) <= 1, titles
    assert titles[-1][1] in names


def test_a_title_that_no_longer_says_the_subject_is_replaced(
    packaged_encoder, fake_openai, session, settings
):
    fake_openai.reply_json(summary_answer(title="Weekend plans", summary="Plans."))
    for _ in range(6):
        fake_openai.reply_json(summary_answer(title="Kyoto trip in April", summary="A Kyoto trip."))
    titles = _titles_while_talking(session, KYOTO_LONG[:12])
    assert titles[-1][1] == "Kyoto trip in April", titles
