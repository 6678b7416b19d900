"""One-line replies (issue 46): a single-subject talk of short questions and one-line
answers forks less than it did on each new question, and a switch in such a talk is still
found. (It still forks: docs/measurements.md, "one-line replies", says how often.)
Since issue 46's third round an unannounced switch in a line that names a subject word or
two, or in a young topic, needs two cues to agree (memory/drift/semantic.py,
``OPENING_*``), and announced switches still fork at once.

Every question of such a talk brings new words, which the word cues read as a new
subject; the semantic detector weighs them against the conversation's usual ones and
compares meanings as windows (memory/drift/semantic.py, ``SHORT_*``). With the packaged
encoder: this test is about it. The dialogues are written for this test (the product set's
test half is never used to build a test)."""

from __future__ import annotations

import pytest

from memory.drift.detectors import Turn
from memory.drift.semantic import SemanticDetector
from memory.text.embeddings import use_encoder

STARTER = [
    "I want to make a sourdough starter. How do I begin?",
    "Mix 50 g of wholemeal flour with 50 g of water in a jar.",
    "Tap water okay?",
    "Yes, if it isn't heavily chlorinated; let it stand overnight otherwise.",
    "How often do I feed it?",
    "Once a day: throw away half, add fresh flour and water.",
    "It smells like nail polish.",
    "That's a hungry starter; feed it twice a day for a while.",
    "There's grey liquid on top.",
    "That's hooch; pour it off or stir it in, and feed it.",
    "When can I bake with it?",
    "When it doubles within six hours of a feed, usually after a week or two.",
    "Can I keep it in the fridge?",
    "Yes, and feed it once a week there.",
    "What do I do with the discard?",
    "Pancakes, crackers or waffles all use it well.",
    "Do I need a special jar?",
    "Any clean glass jar with a loose lid works.",
    "Rye flour or wheat?",
    "Rye gets it going faster; wheat is fine once it's active.",
]
STARTER_THEN_VISA = STARTER[:10] + [
    "Do I need a visa to work in Canada for a year?",
    "Yes, a work permit; many people under 35 use the working holiday programme.",
    "How long does the application take?",
    "Usually a few weeks after the invitation, plus biometrics.",
    "Does it cost much?",
    "About 350 Canadian dollars with the fees and biometrics.",
    "Can I bring my partner?",
    "Your partner would need a permit of their own.",
]
TELESCOPE = [
    "Je voudrais acheter un premier télescope. Lequel choisir ?",
    "Un Dobson de 150 mm est un excellent premier choix.",
    "Combien ça coûte ?",
    "Autour de 350 euros.",
    "On voit les anneaux de Saturne ?",
    "Oui, très nettement à fort grossissement.",
    "Et les galaxies ?",
    "Andromède, oui, mais comme une tache floue.",
    "J'habite en ville.",
    "La pollution lumineuse gêne ; vise la Lune et les planètes.",
    "Il faut des oculaires en plus ?",
    "Un 10 mm et un 25 mm suffisent au début.",
    "C'est lourd ?",
    "Environ 15 kilos, en deux parties.",
    "Une application pour s'orienter ?",
    "Stellarium est gratuite et très bien faite.",
    "Quand est-ce qu'on voit le mieux ?",
    "Les nuits sans lune, loin des lampadaires.",
]

KNITTING = [
    "Ich möchte stricken lernen. Womit fange ich an?",
    "Mit dicker Wolle und Nadeln der Stärke 6, und einem einfachen Schal.",
    "Welche Wolle genau?",
    "Eine glatte Merinowolle, hell, damit du die Maschen gut siehst.",
    "Wie schlage ich an?",
    "Mit dem Kreuzanschlag; dafür gibt es gute kurze Videos.",
    "Meine Maschen sind viel zu fest.",
    "Halte den Faden lockerer und schieb die Maschen weiter nach vorn.",
    "Was sind rechte und linke Maschen?",
    "Die zwei Grundmaschen; abwechselnd gestrickt ergeben sie ein Rippenmuster.",
    "Mir ist eine Masche runtergefallen.",
    "Mit einer Häkelnadel holst du sie Reihe für Reihe wieder hoch.",
    "Wie lang wird der Schal?",
    "Etwa 160 Zentimeter sind eine gute Länge.",
    "Wie kette ich ab?",
    "Zwei Maschen stricken, die erste über die zweite heben, und so weiter.",
    "Kann ich ihn waschen?",
    "Merino von Hand in lauwarmem Wasser, dann liegend trocknen.",
    "Was stricke ich danach?",
    "Eine Mütze mit Rundnadel ist ein guter zweiter Schritt.",
]
ORCHID = [
    "Me han regalado una orquídea. ¿Cómo la cuido?",
    "Luz indirecta, riego escaso y nada de agua en las hojas.",
    "¿Cada cuánto la riego?",
    "Una vez por semana, sumergiendo la maceta diez minutos.",
    "Las raíces se ven grises.",
    "Es normal; cuando se ponen verdes tras regar, están sanas.",
    "¿Dónde la pongo?",
    "Cerca de una ventana al este, sin sol directo de mediodía.",
    "Se le han caído las flores.",
    "Es su ciclo; corta la vara por encima del segundo nudo.",
    "¿Necesita abono?",
    "Abono para orquídeas cada dos riegos, a media dosis.",
    "¿Cuándo se trasplanta?",
    "Cada dos años, en corteza de pino, cuando termina la floración.",
    "Una hoja tiene manchas amarillas.",
    "Puede ser quemadura de sol; apártala un poco de la ventana.",
    "¿Volverá a florecer?",
    "Sí, con una bajada de temperatura nocturna suele sacar otra vara.",
]
ORCHID_THEN_PASSPORT = ORCHID[:10] + [
    "¿Cómo renuevo el pasaporte si caduca el mes que viene?",
    "Pide cita previa en una comisaría con expedición de pasaporte.",
    "¿Qué documentos llevo?",
    "El DNI en vigor, una foto reciente y el pasaporte antiguo.",
    "¿Cuánto cuesta?",
    "Unos 30 euros, que se pagan allí mismo.",
    "¿Tardan mucho en dármelo?",
    "Normalmente te lo entregan en el momento.",
]
KNITTING_THEN_ANNOUNCED = KNITTING[:10] + [
    "Ganz andere Frage: Wie melde ich mich beim Bürgeramt um?",
    "Mit einem Termin, deinem Ausweis und der Wohnungsgeberbestätigung.",
    "Wo bekomme ich die?",
    "Von deinem Vermieter; er muss sie ausfüllen.",
    "Bis wann muss ich das machen?",
    "Innerhalb von zwei Wochen nach dem Einzug.",
]


@pytest.fixture(autouse=True)
def packaged_encoder():
    use_encoder("use")
    yield
    use_encoder(None)


#: The detector of issue 46's first round (one-line replies read as any others) and of its
#: second (one cue may fork a one-line talk): neither held an unconfirmed question back.
FIRST_ROUND = {"one_line": False, "unconfirmed_penalty": None}
SECOND_ROUND = {
    "agreement": False,
    "unconfirmed_penalty": None,
    "short_unconfirmed_penalty": None,
    "short_centre": 0.325,
}


def forks(lines: list[str], detector: SemanticDetector) -> list[int]:
    """Where the fork loop forks, checked every 10 messages and when the user leaves."""
    turns = [Turn("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(lines)]
    found, start = [], 0
    checks = [*range(10, len(turns) + 1, 10)]
    if not checks or checks[-1] != len(turns):
        checks.append(len(turns))
    for seen in checks:
        while True:
            verdict = detector.detect(turns[start:seen], scan_back=10)
            if not verdict.drifted:
                break
            start += verdict.start
            found.append(start)
    return found


@pytest.mark.parametrize("lines", [STARTER, TELESCOPE], ids=["en", "fr"])
def test_a_talk_of_one_line_replies_on_one_subject_forks_at_most_half_as_often(lines):
    before = forks(lines, SemanticDetector(**FIRST_ROUND))  # replies read as any others
    now = forks(lines, SemanticDetector())
    assert len(before) >= 5
    assert len(now) <= len(before) // 2, (before, now)


def test_the_opening_exchange_alone_is_no_topic_to_compare_with():
    assert 2 not in forks(STARTER, SemanticDetector())
    assert 2 not in forks(TELESCOPE, SemanticDetector())


def test_an_unannounced_switch_in_a_one_line_talk_is_still_found():
    assert 10 in forks(STARTER_THEN_VISA, SemanticDetector())


ONE_SUBJECT = {"en": STARTER, "fr": TELESCOPE, "de": KNITTING, "es": ORCHID}


def test_short_follow_ups_far_from_their_window_but_not_from_the_opening_do_not_fork():
    """Knitting: "Meine Maschen sind viel zu fest.", "Wie kette ich ab?" bring new words and
    lie far from the lines around them, not from "Ich möchte stricken lernen"."""
    assert forks(KNITTING, SemanticDetector(**SECOND_ROUND))  # one cue alone forked it
    assert forks(KNITTING, SemanticDetector()) == []


def test_single_subject_one_line_talks_fork_at_most_once_and_less_than_on_one_cue():
    now = {lang: forks(lines, SemanticDetector()) for lang, lines in ONE_SUBJECT.items()}
    one_cue = {
        lang: forks(lines, SemanticDetector(**SECOND_ROUND)) for lang, lines in ONE_SUBJECT.items()
    }
    assert all(len(found) <= 1 for found in now.values()), now
    assert sum(map(len, now.values())) < sum(map(len, one_cue.values())), (now, one_cue)


@pytest.mark.parametrize("lines", [STARTER_THEN_VISA, ORCHID_THEN_PASSPORT], ids=["en", "es"])
def test_an_unannounced_switch_named_in_a_full_question_still_forks(lines):
    assert 10 in forks(lines, SemanticDetector())


def test_an_announced_switch_in_a_one_line_talk_forks_at_once():
    assert forks(KNITTING_THEN_ANNOUNCED, SemanticDetector()) == [10]
