"""An unannounced switch in the last exchange is unconfirmed (issue 46, fourth round): where
the assistant answers in paragraphs it forks only with :data:`UNCONFIRMED_PENALTY` logit
units to spare, so a question that strays once ("Should I stretch afterwards?" in a talk
about a first 10k) waits for the next one, which brings it back to the topic; a new subject
far from the topic, or an announced one, forks at once. With the packaged encoder; the
dialogue is written for this test."""

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
