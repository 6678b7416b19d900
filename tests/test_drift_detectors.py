"""Tests for the model-free drift detectors and the drift-quality scorer (no database)."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

from memory.drift_detectors import (
    DriftVerdict,
    LexicalDetector,
    TextTilingDetector,
    Turn,
    candidate_starts,
    get_detector,
)

_BENCH = Path(__file__).resolve().parent.parent / "bench" / "drift_quality.py"
_spec = importlib.util.spec_from_file_location("drift_quality", _BENCH)
assert _spec and _spec.loader
drift_quality = importlib.util.module_from_spec(_spec)
sys.modules["drift_quality"] = drift_quality
_spec.loader.exec_module(drift_quality)


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
def test_start_stays_inside_the_scan_back_window_and_off_zero(detector, scan_back: int) -> None:
    turns = PASTA + ENGINE + PASTA[:4]
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


def test_detect_is_deterministic_and_fast() -> None:
    detector = get_detector("lexical")
    turns = (PASTA + ENGINE) * 2 + PASTA[:8]
    assert len(turns) == 40
    first = detector.detect(turns, scan_back=10)
    began = time.perf_counter()
    for _ in range(20):
        assert detector.detect(turns, scan_back=10) == first
    assert (time.perf_counter() - began) / 20 < 0.05


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


def test_simulate_forks_once_per_check_and_records_global_positions() -> None:
    class Scripted:
        """Drifts at relative start 3 of every topic at least 5 turns long."""

        name = "scripted"

        def detect(self, turns, *, scan_back):
            if len(turns) >= 5:
                return DriftVerdict(True, 3, "scripted")
            return DriftVerdict(False, None, "scripted")

    turns = [Turn("user", str(i)) for i in range(20)]
    # Checks after turns 5, 10, 15, 20: topic [0,5) forks at 3; [3,10) at 6; [6,15) at 9;
    # [9,20) at 12.
    assert drift_quality.simulate(turns, Scripted(), interval=5, scan_back=10) == [3, 6, 9, 12]
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
    assert summary["bench"] == "drift_quality" and summary["detector"] == "lexical"
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
