"""An unannounced switch in the last exchange is unconfirmed (issue 46, fourth round): where
the assistant answers in paragraphs it forks only with :data:`UNCONFIRMED_PENALTY` logit
units to spare, so a question that strays once ("Should I stretch afterwards?" in a talk
about a first 10k) waits for the next one, which brings it back to the topic; a new subject
far from the topic, or an announced one, forks at once. Since the fifth round one-line talks
wait too, by :data:`SHORT_UNCONFIRMED_PENALTY`, once the question has its answer. With the
packaged encoder; the dialogues are written for this test."""

from __future__ import annotations

import pytest

from memory.drift.detectors import Turn
from memory.drift.semantic import SemanticDetector
from memory.text.embeddings import use_encoder

TEN_K = [
    "I'd like to run my first 10k in June. I can jog about 3 km now. How should I start?",
    "Build up slowly: three runs a week, mostly easy, adding about ten percent of distance "
    "each week. Keep one longer run at the weekend and walk breaks are fine at first. By June "
    "you can comfortably reach 10 km.",
    "How fast should the easy runs be?",
    "Slow enough to talk in full sentences, often a minute or two per kilometre slower than "
    "your race pace. Most beginners run their easy days too fast, which leaves them tired for "
    "the long run. Heart rate around 70 percent of maximum is a good guide.",
    "Do I need special shoes?",
    "A pair of running shoes fitted at a running shop is worth it: they will look at your "
    "stride and suggest a neutral or stability shoe. Replace them every 600 to 800 km. Trail "
    "shoes only matter if you run off road.",
    "What should I eat before a morning run?",
    "For an easy run under an hour, a banana or a slice of toast is plenty, or nothing at all "
    "if your stomach prefers it. Drink a glass of water. Before the race itself, eat a "
    "familiar breakfast two to three hours ahead.",
]
STRETCH = [
    "Should I stretch afterwards?",
    "A few minutes of gentle stretching or mobility work feels good but does not prevent "
    "injuries on its own. Strength exercises like squats and calf raises do more. Keep it "
    "short and relaxed.",
]
BACK_TO_THE_RACE = [
    "How long should my longest run be before the race?",
    "Work up to about 8 to 10 km for the long run two or three weeks before June, then ease "
    "off. The race-day adrenaline covers the rest. Keep the last week light.",
]
PAINT = [
    "We are repainting the living room next month. Which paint holds up with kids?",
    "A washable matt or eggshell emulsion is the usual choice with children: it wipes clean "
    "without showing shiny patches. Scrubbable grades cost a little more. Two coats over a "
    "primer on new plaster.",
]
THIRD_ROUND = {"unconfirmed_penalty": None}


@pytest.fixture(autouse=True)
def packaged_encoder():
    use_encoder("use")
    yield
    use_encoder(None)


def start(lines: list[str], detector: SemanticDetector) -> int | None:
    turns = [Turn("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(lines)]
    return detector.detect(turns, scan_back=10).start


def test_a_question_that_strays_once_waits_for_the_next_one():
    assert start(TEN_K + STRETCH, SemanticDetector(**THIRD_ROUND)) == 8  # it forked alone
    assert start(TEN_K + STRETCH, SemanticDetector()) is None


def test_the_next_question_back_on_the_topic_keeps_the_stray_one_in_it():
    assert start(TEN_K + STRETCH + BACK_TO_THE_RACE, SemanticDetector()) is None


def test_a_new_subject_far_from_the_topic_forks_in_the_last_exchange():
    assert start(TEN_K + PAINT, SemanticDetector()) == 8


def test_an_announced_switch_forks_in_the_last_exchange():
    announced = ["Different question: " + PAINT[0], PAINT[1]]
    assert start(TEN_K + announced, SemanticDetector()) == 8


# One-line talks (issue 46, fifth round): the same wait, SHORT_UNCONFIRMED_PENALTY, once the
# last question has its answer. Written for this test.
GUITAR = [
    "I want to learn the guitar at 40. Acoustic or electric?",
    "Acoustic if you mostly want to strum songs; electric is easier on the fingers.",
    "How long until my fingers stop hurting?",
    "About two to three weeks of daily practice.",
    "Which chords first?",
    "G, C, D and E minor: they cover hundreds of songs.",
    "My F chord buzzes.",
    "Press closer to the fret and roll the index finger slightly.",
]
READ_MUSIC = ["Should I learn to read music?", "Tabs are enough to start; notation can come later."]
PIANO = [
    "Je me mets au piano à 35 ans. Par où commencer ?",
    "Une méthode pour débutants et quinze minutes par jour.",
    "Un clavier numérique suffit ?",
    "Oui, s'il a 88 touches lourdes et une pédale.",
    "Et le solfège ?",
    "Apprends à lire la clé de sol d'abord, la clé de fa ensuite.",
    "Mes mains ne sont pas indépendantes.",
    "Travaille chaque main seule, puis ensemble très lentement.",
]
TEACHER = ["Je dois prendre un prof ?", "Quelques cours au début évitent les mauvaises habitudes."]
PASSPORT = [
    "How do I renew my passport before a trip in May?",
    "Apply online at least ten weeks ahead; the photo must be recent.",
]
#: Issue 46's fourth round: no wait in one-line talks, and the centre before it.
FOURTH_ROUND = {"short_unconfirmed_penalty": None, "short_centre": 0.325}


@pytest.mark.parametrize("talk", [GUITAR + READ_MUSIC, PIANO + TEACHER], ids=["en", "fr"])
def test_an_answered_one_line_question_that_strays_waits_for_the_next_one(talk):
    assert start(talk, SemanticDetector(**FOURTH_ROUND)) == 8  # it forked alone
    assert start(talk, SemanticDetector()) is None


@pytest.mark.parametrize("talk", [GUITAR + READ_MUSIC, PIANO + TEACHER], ids=["en", "fr"])
def test_a_one_line_question_without_its_answer_is_judged_as_before(talk):
    assert start(talk[:-1], SemanticDetector(**FOURTH_ROUND)) == 8
    assert start(talk[:-1], SemanticDetector()) == 8


def test_a_new_subject_in_the_last_exchange_of_a_one_line_talk_still_forks():
    assert start(GUITAR + PASSPORT, SemanticDetector()) == 8
    announced = ["Different question: " + PASSPORT[0], PASSPORT[1]]
    assert start(GUITAR + announced, SemanticDetector()) == 8
