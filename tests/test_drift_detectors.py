"""Tests for the model-free drift detectors and the drift-quality scorer (no database)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench import drift_quality
from memory.drift.detectors import (
    DriftVerdict,
    LexicalDetector,
    TextTilingDetector,
    Turn,
    candidate_starts,
    get_detector,
    has_real_roles,
    reply_reliability,
)
from memory.drift.dialogue_cues import (
    announces_return,
    announces_switch,
    opens_as_follow_up,
    opens_with_reference,
)


class _AnyReason(str):
    """Equal to any reason string, to compare whole verdicts."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)

    __hash__ = str.__hash__


ANY_REASON = _AnyReason()


def _alternating(*texts: str) -> list[Turn]:
    """A user/assistant thread that starts with the user."""
    return [Turn("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(texts)]


PASTA = _alternating(
    "How long should I boil spaghetti so it stays al dente?",
    "Boil the spaghetti in well salted water for about 9 minutes, then taste a strand.",
    "How much salt does the boiling water need?",
    "A tablespoon of salt per 4 litres of boiling water; it should taste of the sea.",
    "Should I add oil to the salted water so the spaghetti does not stick?",
    "No oil needed; stir the spaghetti in the first minute of boiling so it does not stick.",
    "And once the spaghetti is al dente, should I rinse it after draining?",
    "Do not rinse drained spaghetti: its starch helps the sauce cling to it.",
    "Which sauce clings best to spaghetti?",
    "A tomato sauce, or garlic and olive oil, clings well to spaghetti.",
)

ENGINE = _alternating(
    "My car engine makes a knocking noise when I accelerate. What could cause that?",
    "Engine knocking under acceleration often comes from low-octane fuel or worn spark plugs.",
    "How do I check whether the spark plugs in the engine are worn?",
    "Pull each spark plug and look at the electrode: heavy carbon or a wide gap means worn.",
    "Which spark plugs fit a 2012 Honda Civic engine?",
    "The Civic's engine takes iridium spark plugs; check the gap against the service manual.",
)


# A product conversation: the assistant answers in paragraphs, the user's follow-ups
# bring new words (light, watering, fertilizer, flowers) without leaving the subject.
HERBS = _alternating(
    "I'd like to start a small herb garden on my balcony. What should I plant?",
    "Good beginner herbs for a balcony are basil, parsley, chives, mint and thyme. Grow each "
    "in its own pot with drainage holes, because mint in particular spreads and crowds out its "
    "neighbours. Use a light potting mix rather than garden soil, and start with young plants "
    "from a nursery rather than seeds if you want a harvest this summer.",
    "The balcony faces east. Is that enough light?",
    "An east-facing balcony gets the gentle morning sun, usually four to six hours, which suits "
    "parsley, chives and mint very well. Basil and thyme prefer more sun, so put them at the "
    "brightest edge of the balcony and turn the pots every few days so they grow evenly. If "
    "they get leggy and pale, they are asking for more light.",
    "How often should I water the basil?",
    "Water basil when the top two centimetres of the potting mix feel dry, which in summer on a "
    "balcony can mean every day. Water in the morning at the base of the plant and let excess "
    "water drain away; basil hates sitting in wet soil. Terracotta pots dry out faster than "
    "plastic ones, so check them more often on hot days.",
    "What about fertilizer? Do herbs need it?",
    "Herbs need only a little feeding. A liquid organic fertilizer at half strength every three "
    "to four weeks during the growing season is plenty for pots. Too much nitrogen makes basil "
    "and parsley grow lots of soft leaves with less flavour, so err on the side of feeding too "
    "little.",
    "My basil has started making little flowers. Should I pinch them off?",
    "Yes, pinch off the flower buds as soon as you see them. Once basil flowers, the plant puts "
    "its energy into seeds and the leaves turn bitter and sparse. Pinch just above a pair of "
    "leaves; the plant will branch out there and become bushier, which also gives you a bigger "
    "harvest.",
)
HERB_FOLLOW_UPS = _alternating(
    "There are tiny green bugs under some of the mint leaves. What are they?",
    "Those are most likely aphids, which love the soft new growth of mint and basil. Rinse them "
    "off with a strong spray of water every few days, or wipe the undersides of the leaves with "
    "a mild soap solution. Ladybirds eat them too, so avoid spraying insecticide on a balcony "
    "herb garden you harvest from.",
    "Will the thyme and chives survive the winter outside?",
    "Thyme and chives are hardy perennials and usually survive winter in pots outside, though "
    "the chives die back and resprout in spring. Move the pots against the wall of the house, "
    "raise them off the cold floor, and water sparingly. Basil is an annual and will not "
    "survive frost, so harvest it fully before the first cold night.",
    "When I harvest, how much can I cut at once?",
    "Never cut more than about a third of a plant at once, so it keeps enough leaves to grow "
    "back. Cut basil and mint stems just above a leaf pair, and snip chives a few centimetres "
    "above the soil. Regular light harvesting keeps the herbs bushy and productive all summer.",
    "The mint's roots are coming out of the drainage holes. Should I repot it?",
    "Yes, that is a sign the mint has filled its pot. Repot it into a container one size larger "
    "in spring, or divide the root ball with a knife and replant one part in fresh potting mix. "
    "Mint grows back quickly after dividing, and you can give the spare plants to friends.",
)
LISBON = _alternating(
    "Thanks. Different question: can you help me plan a budget for a trip to Lisbon in March?",
    "Sure. For a week in Lisbon in March, plan for flights, accommodation, food, transport and "
    "sightseeing. A mid-range hotel or apartment in Baixa or Alfama costs around 80 to 120 "
    "euros a night in March, meals about 30 to 45 euros a day, and a Viva Viagem card for "
    "trams and the metro around 7 euros a day.",
    "What flights should I look for from Berlin?",
    "From Berlin Brandenburg there are direct flights to Lisbon with TAP Air Portugal, easyJet "
    "and Ryanair, taking about three and a half hours. In March, booking six to eight weeks "
    "ahead usually gets return fares between 100 and 200 euros. Check the baggage rules, since "
    "the low-cost fares often only include a small cabin bag.",
    "Is March a good time weather-wise?",
    "March is mild in Lisbon, with daytime temperatures around 17 to 19 degrees and cooler "
    "evenings. Expect some rainy days, so pack a light waterproof jacket and comfortable shoes "
    "for the steep, slippery cobbled streets. The upside is fewer tourists and lower prices "
    "than in summer.",
)


def _forks_at_every_message(turns: list[Turn]) -> list[tuple[int, int]]:
    """(messages seen, start) of every drift verdict when checked after each message."""
    detector = get_detector("lexical")
    forks = []
    for end in range(1, len(turns) + 1):
        verdict = detector.detect(turns[:end], scan_back=10)
        if verdict.drifted:
            forks.append((end, verdict.start))
    return forks


@pytest.fixture(params=["lexical", "baseline"])
def detector(request: pytest.FixtureRequest):
    return get_detector(request.param)


def test_lexical_is_the_default_and_names_match() -> None:
    assert isinstance(get_detector("lexical"), LexicalDetector)
    assert isinstance(get_detector("baseline"), TextTilingDetector)
    assert get_detector().name == "lexical"
    assert get_detector("baseline").name == "baseline"


def test_unknown_detector_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="baseline.*lexical"):
        get_detector("embedding")


def test_clear_topic_change_is_found_at_the_first_turn_of_the_new_subject(detector) -> None:
    turns = PASTA[:8] + ENGINE
    verdict = detector.detect(turns, scan_back=10)
    assert verdict.drifted, verdict.reason
    assert verdict.start == 8, verdict.reason
    assert len(turns) - 10 <= verdict.start < len(turns)


def test_topic_change_right_after_it_arrives_is_found_by_the_production_detector() -> None:
    """At a one-message cadence the new subject's first question is enough."""
    verdict = get_detector("lexical").detect(PASTA[:8] + ENGINE[:1], scan_back=10)
    assert verdict == DriftVerdict(True, 8, verdict.reason)


def test_coherent_single_topic_thread_does_not_drift() -> None:
    """Only asked of the production detector: the baseline's fixed depth threshold
    does split coherent threads, which is part of why it is only the baseline."""
    detector = get_detector("lexical")
    for thread in (PASTA, ENGINE):
        for end in range(1, len(thread) + 1):  # as checked after every message
            verdict = detector.detect(thread[:end], scan_back=10)
            assert not verdict.drifted, verdict.reason
            assert verdict.start is None


@pytest.mark.parametrize("scan_back", [1, 2, 3, 5, 10, 40])
@pytest.mark.parametrize(
    "turns",
    [
        PASTA + ENGINE + PASTA[:4],
        HERBS + LISBON + HERBS[:4],
        [Turn("user", t.text) for t in ENGINE],
    ],
    ids=["short-replies", "long-replies", "people"],
)
def test_start_stays_inside_the_scan_back_window_and_off_zero(
    detector, scan_back: int, turns: list[Turn]
) -> None:
    for end in range(1, len(turns) + 1):
        verdict = detector.detect(turns[:end], scan_back=scan_back)
        if verdict.drifted:
            assert verdict.start is not None
            assert max(2, end - scan_back) <= verdict.start < end


@pytest.mark.parametrize(
    "turns",
    [
        [],
        [Turn("user", "How do I fix my car engine?")],
        [Turn("user", "pasta?"), Turn("assistant", "engine!")],
        [Turn("user", ""), Turn("assistant", ""), Turn("user", ""), Turn("assistant", "")],
        [Turn("user", "   "), Turn("assistant", "..."), Turn("user", "?"), Turn("assistant", "!")],
    ],
)
def test_short_or_empty_input_does_not_drift(detector, turns: list[Turn]) -> None:
    verdict = detector.detect(turns, scan_back=10)
    assert verdict == DriftVerdict(False, None, verdict.reason)


def test_zero_scan_back_never_drifts(detector) -> None:
    assert not detector.detect(PASTA[:8] + ENGINE, scan_back=0).drifted


def test_candidate_starts_respects_window_and_old_topic_minimum() -> None:
    assert list(candidate_starts(12, 10)) == list(range(2, 12))
    assert list(candidate_starts(30, 10)) == list(range(20, 30))
    assert list(candidate_starts(3, 10)) == [2]
    assert list(candidate_starts(2, 10)) == []


@pytest.mark.parametrize(
    "turns",
    [(PASTA + ENGINE) * 2 + PASTA[:8], HERBS + HERB_FOLLOW_UPS + HERBS + LISBON + LISBON],
    ids=["short-replies", "long-replies"],
)
def test_detect_is_deterministic_and_fast(turns: list[Turn]) -> None:
    """40 turns, of short lines or of paragraph-long replies, in well under 50 ms."""
    detector = get_detector("lexical")
    assert len(turns) == 40
    first = detector.detect(turns, scan_back=10)
    began = time.perf_counter()
    for _ in range(20):
        assert detector.detect(turns, scan_back=10) == first
    assert (time.perf_counter() - began) / 20 < 0.05


# --------------------------------------------------------------------------- #
# Product conversations: a user steers, an assistant answers at length
# --------------------------------------------------------------------------- #


def test_herb_garden_forks_at_the_lisbon_question_and_not_before() -> None:
    """The follow-ups on fertilizer and flowers stay; the announced trip forks at once."""
    turns = HERBS + LISBON
    forks = _forks_at_every_message(turns)
    assert forks, "the Lisbon question was not found"
    assert forks[0] == (11, 10)  # as soon as the Lisbon turn arrives
    assert {start for _, start in forks} == {10}  # never the fertilizer or flights turn


@pytest.mark.parametrize("interval", [1, 2, 5, 10])
def test_herb_garden_to_lisbon_through_the_fork_loop_forks_once_at_lisbon(interval: int) -> None:
    """At every cadence, ten messages (the production one) included, one fork at Lisbon."""
    turns = HERBS + LISBON + LISBON[2:6]
    assert len(turns) == 20
    boundaries = drift_quality.simulate(
        turns, get_detector("lexical"), interval=interval, scan_back=10
    )
    assert boundaries == [10]


def test_unannounced_new_subject_waits_for_its_answer_then_forks_at_the_question() -> None:
    """A bare question may be a follow-up ("what about aphids?"): judged with its reply."""
    question = Turn("user", "Can you help me plan a budget for a trip to Lisbon in March?")
    turns = [*HERBS, question, *LISBON[1:]]
    detector = get_detector("lexical")
    assert not detector.detect(turns[:11], scan_back=10).drifted
    assert detector.detect(turns[:12], scan_back=10) == DriftVerdict(True, 10, ANY_REASON)


def test_long_coherent_thread_with_new_words_in_its_follow_ups_is_not_forked() -> None:
    turns = HERBS + HERB_FOLLOW_UPS
    assert len(turns) == 18
    assert _forks_at_every_message(turns) == []
    for interval in (1, 10):
        assert drift_quality.simulate(turns, get_detector(), interval=interval, scan_back=10) == []


@pytest.mark.parametrize(
    "opening",
    [
        "By the way, my laptop fan has been really loud lately. Should I worry?",
        "Switching gears: my laptop fan has been really loud lately. Should I worry?",
        "Unrelated, but my laptop fan has been really loud lately. Should I worry?",
        "Thanks, that helps. On another note, my laptop fan is really loud. Should I worry?",
        "Anyway, my laptop fan has been really loud lately. Should I worry?",
    ],
)
def test_announced_switch_is_found_at_the_announcing_turn(opening: str) -> None:
    turns = [*HERBS, *HERB_FOLLOW_UPS[:4], Turn("user", opening)]
    verdict = get_detector("lexical").detect(turns, scan_back=10)
    assert verdict == DriftVerdict(True, 14, ANY_REASON)


def test_return_to_an_earlier_subject_forks_the_digression_off() -> None:
    """After the Lisbon topic was forked off, going back to the herbs is a new subject."""
    back = Turn("user", "Ok, back to my herbs: the basil leaves are turning yellow. Why?")
    reply = Turn(
        "assistant",
        "Yellow basil leaves usually mean overwatering or a pot without enough drainage, "
        "sometimes a lack of nitrogen. Let the potting mix dry out between waterings and "
        "feed it lightly once.",
    )
    verdict = get_detector("lexical").detect([*LISBON, back, reply], scan_back=10)
    assert verdict == DriftVerdict(True, 6, ANY_REASON)


def test_assistant_turns_never_open_a_subject_when_roles_are_real() -> None:
    """The assistant answers; even a reply that asks about new things starts no topic.

    Read as a chat between two people, the offer below opens a subject (checked too).
    """
    turns = [
        *HERBS[:6],
        Turn("user", "I think that's everything I wanted to know about the garden."),
        Turn(
            "assistant",
            "What else can I help you with today? I can plan trips, budgets, recipes or "
            "workouts for example.",
        ),
    ]
    detector = get_detector("lexical")
    assert not detector.detect(turns, scan_back=10).drifted
    people = [Turn("user", turn.text) for turn in turns]
    assert detector.margins(people, range(2, 8))[7] > 0
    for end in range(1, len(HERBS + LISBON) + 1):
        verdict = detector.detect((HERBS + LISBON)[:end], scan_back=10)
        assert not verdict.drifted or (HERBS + LISBON)[verdict.start].role == "user"


def test_roles_are_real_only_with_both_roles_and_replies_weigh_by_their_length() -> None:
    assert has_real_roles(HERBS) and has_real_roles(PASTA)
    assert not has_real_roles([Turn("user", t.text) for t in HERBS])
    assert reply_reliability(HERBS) == 1.0  # paragraph replies
    assert reply_reliability([Turn("user", "hi"), Turn("assistant", "Yes, it does.")]) == 0.0
    assert reply_reliability([Turn("user", t.text) for t in HERBS]) == 0.0


def test_thread_between_people_lets_either_speaker_open_a_subject() -> None:
    """Without an assistant every turn may open a subject, as in TIAGE: the engine
    question at turn 9 forks between people, but is no start when it is the
    assistant's turn of a user/assistant thread."""
    texts = [t.text for t in PASTA[:9] + ENGINE]
    people = [Turn("user", text) for text in texts]
    detector = get_detector("lexical")
    assert detector.detect(people, scan_back=10) == DriftVerdict(True, 9, ANY_REASON)
    assert not detector.detect(_alternating(*texts), scan_back=10).drifted


@pytest.mark.parametrize(
    ("text", "switch", "back", "follow_up", "reference"),
    [
        ("Thanks. Different question: how do I fix a bike chain?", True, False, False, False),
        ("Quick unrelated question: how long does rice keep?", True, False, False, False),
        ("Anyway, one more git thing: how do I undo a commit?", True, False, False, False),
        ("Ok, back to photography: which lens for portraits?", False, True, False, False),
        ("What about fertilizer? Do herbs need it?", False, False, True, False),
        ("And how often should I water it?", False, False, True, False),
        ("What should it include?", False, False, False, True),
        ("I'll try it anyway, but which pot is best?", False, False, False, False),
        ("How do I cancel my gym membership if they ignore me?", False, False, False, False),
    ],
)
def test_cue_phrases_are_read_where_a_turn_announces_itself(
    text: str, switch: bool, back: bool, follow_up: bool, reference: bool
) -> None:
    assert announces_switch(text) is switch
    assert announces_return(text) is back
    assert opens_as_follow_up(text) is follow_up
    assert opens_with_reference(text) is reference


# --------------------------------------------------------------------------- #
# Scorer
# --------------------------------------------------------------------------- #


def test_window_size_is_half_the_mean_segment_and_at_least_two() -> None:
    assert drift_quality.window_size(12, [4, 8]) == 2  # segments of 4 -> k = 2
    assert drift_quality.window_size(12, []) == 6  # one segment of 12 -> k = 6
    assert drift_quality.window_size(12, [3, 6, 9]) == 2  # 3 / 2 rounds up to 2
    assert drift_quality.window_size(15, [5, 10]) == 3  # 5 / 2 rounds half up to 3
    assert drift_quality.window_size(12, [1, 2, 3, 4, 5]) == 2  # 1 -> floor at 2


def test_perfect_prediction_scores_zero_error_and_full_f1() -> None:
    assert drift_quality.pk(12, [4, 8], [4, 8]) == 0.0
    assert drift_quality.window_diff(12, [4, 8], [4, 8]) == 0.0
    assert drift_quality.boundary_f1([[4, 8], [3]], [[4, 8], [3]]) == 1.0


def test_missing_every_boundary_is_penalised() -> None:
    # n=12, k=2, probes i=0..9: the pair (i, i+2) straddles a boundary for i in 2,3,6,7.
    assert drift_quality.pk(12, [4, 8], []) == pytest.approx(4 / 10)
    assert drift_quality.window_diff(12, [4, 8], []) == pytest.approx(4 / 10)
    assert drift_quality.boundary_f1([[4, 8]], [[]]) == 0.0


def test_near_miss_costs_less_than_a_miss_and_windowdiff_counts_extras() -> None:
    # Boundary one turn late: probes i=2 (ref differs, hyp same) and i=4 (hyp differs).
    assert drift_quality.pk(12, [4, 8], [5, 8]) == pytest.approx(2 / 10)
    # An extra boundary right after a true one: one probe for Pk, two windows for WindowDiff.
    assert drift_quality.pk(12, [4, 8], [4, 5, 8]) == pytest.approx(1 / 10)
    assert drift_quality.window_diff(12, [4, 8], [4, 5, 8]) == pytest.approx(2 / 10)


def test_f1_pools_boundaries_over_dialogues() -> None:
    # 2 hits out of 4 predicted and 3 relevant: P = 1/2, R = 2/3, F1 = 4/7.
    f1 = drift_quality.boundary_f1([[4, 8], [3]], [[4, 9], [3, 6]])
    assert f1 == pytest.approx(4 / 7)


def test_simulate_forks_as_often_as_the_window_holds_subjects_at_global_positions() -> None:
    class Scripted:
        """Drifts at relative start 3 of every topic at least 5 turns long."""

        name = "scripted"

        def detect(self, turns, *, scan_back):
            if len(turns) >= 5:
                return DriftVerdict(True, 3, "scripted")
            return DriftVerdict(False, None, "scripted")

    turns = [Turn("user", str(i)) for i in range(20)]
    # Checks after turns 5, 10, 15, 20, each judging the new topic again after a fork:
    # [0,5) forks at 3; [3,10) at 6; [6,15) at 9, then [9,15) at 12; [12,20) at 15, then
    # [15,20) at 18.
    expected = [3, 6, 9, 12, 15, 18]
    assert drift_quality.simulate(turns, Scripted(), interval=5, scan_back=10) == expected
    # One fork per check at most would have stopped at 3, 6, 9, 12.
    # Every turn: forks whenever the topic reaches 5 turns, i.e. every 3 turns.
    expected = [3, 6, 9, 12, 15, 18]
    assert drift_quality.simulate(turns, Scripted(), interval=1, scan_back=10) == expected


def test_bench_command_prints_both_detectors_and_writes_predictions(tmp_path, capsys) -> None:
    data = tmp_path / "tiny.jsonl"
    turns = [{"role": t.role, "text": t.text} for t in PASTA[:8] + ENGINE]
    data.write_text(json.dumps({"id": "d1", "turns": turns, "boundaries": [8]}) + "\n")
    out = tmp_path / "pred.jsonl"
    argv = ["--data", str(data), "--interval", "1", "--out", str(out)]
    assert drift_quality.main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["bench"] == "drift_quality" and summary["detector"] == "semantic"
    assert summary["interval"] == 1 and set(summary["baseline"]) == {"pk", "wd", "f1"}
    assert summary["f1"] == 1.0 and summary["pk"] == 0.0
    assert json.loads(out.read_text()) == {"id": "d1", "boundaries": [8]}


def test_simulate_rejects_a_start_outside_the_window() -> None:
    class Broken:
        name = "broken"

        def detect(self, turns, *, scan_back):
            return DriftVerdict(True, 0, "broken")

    with pytest.raises(ValueError, match="outside the window"):
        drift_quality.simulate([Turn("user", "x")] * 12, Broken(), interval=10, scan_back=10)


# --------------------------------------------------------------------------- #
# Bench: roles per source, false forks, the product-like data
# --------------------------------------------------------------------------- #

_PRODUCT_DATA = Path(__file__).resolve().parent.parent / "bench" / "data"


def _row(source: str, boundaries: list[int]) -> str:
    turns = [{"role": t.role, "text": t.text} for t in PASTA[:8] + ENGINE]
    return json.dumps({"id": source, "source": source, "turns": turns, "boundaries": boundaries})


def test_loading_reads_tiage_speakers_as_people_and_keeps_real_roles(tmp_path) -> None:
    data = tmp_path / "mixed.jsonl"
    data.write_text(_row("tiage", [8]) + "\n" + _row("superdialseg", [8]) + "\n")
    tiage, grounded = drift_quality.load_dialogues(data, roles="auto")
    assert {t.role for t in tiage.turns} == {"user"} and tiage.source == "tiage"
    assert [t.role for t in grounded.turns] == [t.role for t in PASTA[:8] + ENGINE]
    labelled = drift_quality.load_dialogues(data, roles="labelled")
    assert {t.role for t in labelled[0].turns} == {"user", "assistant"}
    people = drift_quality.load_dialogues(data, roles="people")
    assert all(t.role == "user" for d in people for t in d.turns)
    with pytest.raises(ValueError, match="roles"):
        drift_quality.load_dialogues(data, roles="guess")


def test_false_forks_are_counted_per_dialogue_with_a_single_subject() -> None:
    dialogues = [
        drift_quality.Dialogue("a", PASTA, []),
        drift_quality.Dialogue("b", PASTA, []),
        drift_quality.Dialogue("c", PASTA + ENGINE, [10]),
    ]
    scores = drift_quality.score(dialogues, [[4, 6], [], [10, 12]])
    assert scores.coherent == 2
    assert scores.false_forks == pytest.approx(1.0)  # two forks over two coherent dialogues


def test_bench_summary_reports_false_forks_when_the_data_has_coherent_dialogues(
    tmp_path, capsys
) -> None:
    data = tmp_path / "coherent.jsonl"
    turns = [{"role": t.role, "text": t.text} for t in HERBS + HERB_FOLLOW_UPS]
    data.write_text(json.dumps({"id": "h", "source": "x", "turns": turns, "boundaries": []}))
    assert drift_quality.main(["--data", str(data), "--interval", "1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["false_forks_per_coherent"] == 0.0
    assert "false_forks_per_coherent" in summary["baseline"]


@pytest.mark.parametrize("name", ["product-tune", "product-test"])
def test_product_dialogues_are_well_formed(name: str) -> None:
    """Hand-written product-like conversations: the user opens every subject."""
    dialogues = drift_quality.load_dialogues(_PRODUCT_DATA / f"{name}.jsonl", roles="labelled")
    assert len(dialogues) >= 15
    assert sum(1 for d in dialogues if not d.boundaries) >= 4  # coherent ones
    assert sum(len(d.boundaries) for d in dialogues) >= 15
    for dialogue in dialogues:
        assert dialogue.id.startswith(name) and dialogue.source == "driftless-product"
        assert 10 <= len(dialogue.turns) <= 40
        roles = [t.role for t in dialogue.turns]
        assert roles == ["user", "assistant"] * (len(roles) // 2), dialogue.id
        assert all(0 < b < len(roles) and roles[b] == "user" for b in dialogue.boundaries)


def test_product_tuning_and_held_out_dialogues_do_not_overlap() -> None:
    tune, held_out = (
        drift_quality.load_dialogues(_PRODUCT_DATA / f"{name}.jsonl")
        for name in ("product-tune", "product-test")
    )
    tune_texts = {t.text for d in tune for t in d.turns}
    assert not tune_texts & {t.text for d in held_out for t in d.turns}


def test_exchange_weights_fit_on_the_cues_the_detector_sees() -> None:
    dialogues = drift_quality.load_dialogues(_PRODUCT_DATA / "product-tune.jsonl")[:4]
    rows, labels = drift_quality.exchange_examples(dialogues, interval=10, scan_back=10)
    assert rows and len(rows) == len(labels) and 0 < sum(labels) < len(labels)
    weights = drift_quality.fit_exchange_weights(dialogues, scan_back=10)
    assert set(weights) == {"bias", *rows[0]}


def test_product_data_spans_six_languages_with_labelled_switch_kinds() -> None:
    halves = [
        drift_quality.load_dialogues(_PRODUCT_DATA / f"{name}.jsonl")
        for name in ("product-tune", "product-test")
    ]
    assert sum(len(half) for half in halves) >= 40
    for half in halves:
        assert {d.lang for d in half} >= {"en", "es", "de", "fr", "ru", "ja"}
        for lang in ("es", "de", "fr", "ru", "ja"):
            assert sum(len(d.boundaries) for d in half if d.lang == lang) >= 4
            assert any(not d.boundaries for d in half if d.lang == lang)
        kinds = [d.kind_of(b) for d in half for b in d.boundaries]
        assert set(kinds) == {"cue", "no_cue", "same_domain"}


def test_switches_count_as_found_within_two_turns_by_language_and_kind() -> None:
    dialogues = [
        drift_quality.Dialogue("a", PASTA + ENGINE, [10, 16], lang="en", kinds=("cue", "no_cue")),
        drift_quality.Dialogue("b", PASTA, [], lang="ru"),
    ]
    by_lang, by_kind = drift_quality.switch_tallies(dialogues, [[12, 19], [4]])
    assert (by_lang["en"].switches, by_lang["en"].found) == (2, 1)  # 12 is 2 from 10
    assert (by_kind["cue"].found, by_kind["no_cue"].found) == (1, 0)  # 19 is 3 from 16
    assert (by_lang["ru"].coherent, by_lang["ru"].false_forks) == (1, 1)
    assert by_kind["coherent"].as_json() == {
        "switches": 0,
        "found": 0,
        "coherent": 1,
        "false_forks_per_coherent": 1.0,
    }


def test_the_fork_loop_also_runs_when_the_user_leaves_after_the_last_turn() -> None:
    assert drift_quality.checkpoints(24, 10) == [10, 20, 24]
    assert drift_quality.checkpoints(20, 10) == [10, 20]
    assert drift_quality.checkpoints(24, 10, exit_check=False) == [10, 20]


def test_offline_replies_leave_only_announced_switches_to_fork() -> None:
    offline = drift_quality.with_offline_replies(drift_quality.Dialogue("h", HERBS + LISBON, [10]))
    assert {t.text for t in offline.turns if t.role == "assistant"} == {drift_quality.OFFLINE_REPLY}
    detector = get_detector("lexical")
    assert drift_quality.simulate(offline.turns, detector, interval=10, scan_back=10) == [10]
    unannounced = [
        t if i != 10 else Turn("user", "Can you help me plan a budget for a trip to Lisbon?")
        for i, t in enumerate(offline.turns)
    ]
    assert drift_quality.simulate(unannounced, detector, interval=10, scan_back=10) == []
