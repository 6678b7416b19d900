"""A session's title says what the session is about, not its first words (issue 46).

The rule (memory.stores.messages.shown_session_title): the user's rename, else the title of
the session's main topic, the titled topic holding the most conversation messages (the
earliest on a tie). A greeting ("Hi!", "Bonjour !") never names a topic: the offline
model's title and a failed summary's fallback both start from the first message that
says something (memory/llm/gist.py ``subject_message``). Runs on the offline model and on
a model behind the fake provider, with the test suite's stand-in encoder."""

from __future__ import annotations

import pytest

from memory.actions.digest import fallback_summary
from memory.actions.summarize import do_summarize_topic
from memory.actions.topics import do_new_topic
from memory.llm.gist import gist, says_something, subject_message
from memory.models import Message, Session
from memory.stores.messages import shown_session_title, with_list_fields
from tests.evaluation_helpers import converse, summary_answer

GREETING_THEN_BIKE = {
    "en": [
        ("user", "Hi!"),
        ("assistant", "Hello! What can I do for you today?"),
        ("user", "I want to buy a used road bike to commute, my budget is 400 euros."),
        ("assistant", "For 400 euros look for an aluminium frame with Shimano 105 or Tiagra."),
        ("user", "Which frame size for a road bike if I'm 1.80 m?"),
        ("assistant", "Usually a 56 cm frame; test ride it before you pay."),
        ("user", "What should I check on a used road bike before buying?"),
        ("assistant", "Cracks in the frame, a worn chain, true wheels and working brakes."),
    ],
    "fr": [
        ("user", "Bonjour, ça va ?"),
        ("assistant", "Bonjour ! Très bien, que puis-je faire pour vous ?"),
        ("user", "Je veux acheter un vélo de route d'occasion pour aller au travail."),
        ("assistant", "Cherchez un cadre en aluminium avec un groupe Shimano 105 ou Tiagra."),
        ("user", "Quelle taille de cadre pour un vélo de route si je mesure 1,80 m ?"),
        ("assistant", "En général un cadre de 56 cm ; essayez-le avant de payer."),
        ("user", "Que vérifier sur un vélo de route d'occasion avant l'achat ?"),
        ("assistant", "Les fissures du cadre, la chaîne, les roues voilées et les freins."),
    ],
    "de": [
        ("user", "Hallo!"),
        ("assistant", "Hallo! Wobei kann ich helfen?"),
        ("user", "Ich möchte ein gebrauchtes Rennrad für den Weg zur Arbeit kaufen."),
        ("assistant", "Such nach einem Alurahmen mit Shimano 105 oder Tiagra."),
        ("user", "Welche Rahmengröße brauche ich beim Rennrad mit 1,80 m?"),
        ("assistant", "Meist 56 cm; mach vor dem Kauf eine Probefahrt."),
        ("user", "Worauf achte ich bei einem gebrauchten Rennrad vor dem Kauf?"),
        ("assistant", "Auf Risse im Rahmen, die Kette, die Laufräder und die Bremsen."),
    ],
}
SUBJECT_WORD = {"en": "bike", "fr": "vélo", "de": "Rennrad"}


def shown(session: Session) -> str:
    return shown_session_title(with_list_fields(Session.objects.filter(pk=session.pk)).get())


def test_a_greeting_says_nothing_and_a_subject_does():
    for greeting in ("Hi!", "hello", "Hey there, how are you?", "Bonjour, ça va ?", "Hallo!"):
        assert not says_something(greeting), greeting
    for greeting in ("Привет!", "こんにちは", "¡Hola! ¿Qué tal?", "Good morning!"):
        assert not says_something(greeting), greeting
    assert says_something("Hi! My bike chain keeps slipping.")
    assert subject_message(["Hi!", "My bike chain slips", "ok"]) == "My bike chain slips"
    assert subject_message(["Hello"]) == "Hello"  # nothing better: the first one


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_a_greeting_then_a_subject_is_named_by_the_subject_offline(session, lang):
    converse(session, GREETING_THEN_BIKE[lang])
    do_summarize_topic(topic_id=session.active_topic().pk, reason="refresh")

    title = shown(session)
    assert SUBJECT_WORD[lang].lower() in title.lower(), title
    assert not title.lower().startswith(("hi", "bonjour", "hallo")), title


def test_a_failed_summary_names_the_topic_by_its_subject_not_the_greeting(
    session, fake_openai, settings
):
    fake_openai.fail(500)
    converse(session, GREETING_THEN_BIKE["en"])
    do_summarize_topic(topic_id=session.active_topic().pk, reason="refresh")

    topic = session.active_topic()
    assert topic.summary_is_fallback
    assert shown(session).startswith("I want to buy a used road bike"), shown(session)


def test_the_fallback_skips_greetings_in_every_language_the_gist_knows():
    messages = [
        Message(role=Message.Role.USER, content="Привет!"),
        Message(role=Message.Role.ASSISTANT, content="Привет! Чем помочь?"),
        Message(role=Message.Role.USER, content="Хочу засолить огурцы на зиму."),
    ]
    assert fallback_summary(messages).title == "Хочу засолить огурцы на зиму."


def _topic_with(session: Session, lines, *, title: str):
    converse(session, lines)
    topic = session.active_topic()
    topic.title = title
    topic.save(update_fields=["title"])
    return topic


TAP = [
    ("user", "My kitchen tap drips."),
    ("assistant", "Replace the washer or the cartridge."),
    ("user", "Which one do I have?"),
    ("assistant", "A single lever means a cartridge."),
]
LAPTOP = [
    ("user", "I need a new laptop for work."),
    ("assistant", "What do you run on it?"),
    ("user", "Docker and VS Code, and I travel a lot."),
    ("assistant", "Then 32 GB of memory and a long battery life."),
    ("user", "Is a 14 inch screen enough?"),
    ("assistant", "Yes, with an external monitor at your desk."),
    ("user", "ARM or x86?"),
    ("assistant", "x86 if your Docker images are x86 only."),
]


def _title_of(topic) -> str:
    topic.refresh_from_db(fields=["title"])
    return topic.title


def test_a_session_with_two_topics_is_named_after_its_main_subject(session):
    tap = _topic_with(session, TAP, title="Dripping kitchen tap")
    do_new_topic(session=session)  # the offline model summarizes (and names) the tap topic
    laptop = _topic_with(session, LAPTOP[:2], title="A laptop for work")
    assert "tap" in _title_of(tap)
    assert shown(session) == _title_of(tap)  # 4 messages against 2

    converse(session, LAPTOP[2:4])
    assert shown(session) == _title_of(tap)  # 4 against 4: the earlier one

    converse(session, LAPTOP[4:])
    assert shown(session) == _title_of(laptop)  # what the session is mostly about


def test_the_first_topic_keeps_the_name_when_it_stays_the_main_subject(session):
    laptop = _topic_with(session, LAPTOP, title="A laptop for work")
    do_new_topic(session=session)
    _topic_with(session, TAP, title="Dripping kitchen tap")
    assert shown(session) == _title_of(laptop)
    assert "laptop" in shown(session).lower()


def test_the_users_own_name_wins(session):
    _topic_with(session, LAPTOP, title="A laptop for work")
    Session.objects.filter(pk=session.pk).update(title="Work kit")
    assert shown(session) == "Work kit"


def test_the_session_title_settles_while_the_subject_goes_on_offline(session):
    """One subject, 16 messages, a summary every two messages (as evaluations refresh it):
    once the topic holds 6 messages the session's title changes at most once."""
    lines = GREETING_THEN_BIKE["en"] + [
        ("user", "Are disc brakes worth it on a commuting road bike?"),
        ("assistant", "Yes in the rain; rim brakes are lighter and cheaper to service."),
        ("user", "Can I fit mudguards on it?"),
        ("assistant", "Only if the frame has eyelets and room for them."),
        ("user", "What tyre width for rough city roads?"),
        ("assistant", "28 mm if it fits, 25 mm otherwise."),
        ("user", "And a lock, which one for the station?"),
        ("assistant", "A D-lock plus a cable for the front wheel."),
    ]
    titles = titles_while_conversing(session, lines)
    after = [title for end, title in titles if end >= 6]
    assert sum(1 for a, b in zip(after, after[1:], strict=False) if a != b) <= 1, titles
    assert "bike" in titles[-1][1].lower(), titles


def test_a_model_that_renames_the_subject_every_time_leaves_the_session_title_settled(
    session, fake_openai, settings
):
    names = ["Used road bike", "Buying a commuter bike", "Road bike for commuting"]
    for index in range(8):
        fake_openai.reply_json(summary_answer(title=names[index % 3], summary="A road bike."))
    titles = titles_while_conversing(session, GREETING_THEN_BIKE["en"] * 2)
    after = [title for end, title in titles if end >= 6]
    assert sum(1 for a, b in zip(after, after[1:], strict=False) if a != b) <= 1, titles


def test_the_offline_title_of_a_topic_skips_the_greeting():
    found = gist(["Hello!", "I need a recipe for banana bread.", "Can I add walnuts to it?"])
    assert "banana bread" in found.title.lower(), found


def titles_while_conversing(session, lines: list) -> list[tuple[int, str]]:
    """The session's shown title after every exchange of ``lines``, each refreshed as the
    summarizer refreshes it: (messages so far, title)."""
    titles = []
    topic = session.active_topic()
    for end in range(2, len(lines) + 1, 2):
        converse(session, lines[end - 2 : end])
        do_summarize_topic(topic_id=topic.pk, reason="refresh")
        titles.append((end, shown(session)))
    return titles
