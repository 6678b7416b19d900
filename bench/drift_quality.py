"""Drift-detection quality benchmark: replay segmented dialogues through the fork loop.

Usage (from the repository root)::

    python -m bench.drift_quality --data $DRIFT_DATA/tiage-dev.jsonl \
        [--detector lexical] [--interval 10] [--scan-back 10] [--out predictions.jsonl] \
        [--roles auto|labelled|people]
    python -m bench.drift_quality --fit $DRIFT_DATA/tiage-train.jsonl
    python -m bench.drift_quality --fit-exchange bench/data/product-tune.jsonl

Scoring a detector alone on whole dialogues would flatter it: in production it
sees only the active topic, only every ``interval`` messages, and every fork it
makes changes what it sees next. So each dialogue is replayed turn by turn
through the same loop as the message-send path (:func:`simulate`), and the
boundaries that loop produces are scored against the reference with Pk,
WindowDiff and boundary F1 as defined in ``$DRIFT_DATA/README.md``.
The baseline detector always runs through the same loop in the same process.

Roles: the detector reads a thread with user and assistant turns as the product's
conversation (only the user opens subjects). In TIAGE both speakers are people and
its ``user``/``assistant`` labels only alternate, so ``--roles auto`` (the default)
gives the detector every turn of a source listed in :data:`PEOPLE_SOURCES` as a
``user`` turn, which is what they are; ``labelled`` keeps the file's labels and
``people`` relabels any file. Product-like data (``bench/data/product-*.jsonl``,
written for this bench: an assistant's long replies, topics of many turns) and
SuperDialseg (a user and an agent) keep their labels.

Besides Pk, WindowDiff and F1 the bench prints false forks per coherent dialogue:
forks in dialogues whose reference has no boundary at all, the error a user of a
single-subject conversation sees.

``--fit`` refits the per-turn cue weights on a training file and ``--fit-exchange``
the exchange cue weights (threads with real roles), each printed with a threshold
sweep, for pasting into ``memory/drift/detectors.py``. ``python -m bench.drift_sweep``
sweeps the semantic detector's one-line-reply settings.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from memory.drift.detectors import (
    EXCHANGE_THRESHOLD,
    DriftDetector,
    LexicalDetector,
    Turn,
    candidate_starts,
    exchange_cues,
    exchange_end,
    subject_cues,
)
from memory.drift.semantic import get_detector

#: Sources whose two speakers are both people: their role labels carry no meaning.
PEOPLE_SOURCES = frozenset({"tiage"})


@dataclass(frozen=True)
class Dialogue:
    id: str
    turns: list[Turn]
    boundaries: list[int]
    source: str = ""
    lang: str = "en"
    kinds: tuple[str, ...] = ()  # per boundary: "cue", "no_cue" or "same_domain"

    def kind_of(self, boundary: int) -> str:
        if len(self.kinds) == len(self.boundaries):
            return self.kinds[self.boundaries.index(boundary)]
        return "unlabelled"


@dataclass(frozen=True)
class Scores:
    pk: float
    wd: float
    f1: float
    false_forks: float = 0.0  # forks per dialogue whose reference has no boundary
    coherent: int = 0  # how many such dialogues there are


def load_dialogues(path: str | Path, *, roles: str = "auto") -> list[Dialogue]:
    """Dialogues of a ``$DRIFT_DATA`` JSON-lines file.

    ``roles``: "labelled" keeps the file's roles, "people" makes every turn a user
    turn, "auto" does so for the sources in :data:`PEOPLE_SOURCES` only.
    """
    if roles not in ("auto", "labelled", "people"):
        raise ValueError(f"unknown roles mode {roles!r}")
    dialogues = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                source = row.get("source", "")
                people = roles == "people" or (roles == "auto" and source in PEOPLE_SOURCES)
                turns = [Turn("user" if people else t["role"], t["text"]) for t in row["turns"]]
                pairs = sorted(
                    zip(
                        row["boundaries"],
                        row.get("kinds") or [""] * len(row["boundaries"]),
                        strict=True,
                    )
                )
                dialogues.append(
                    Dialogue(
                        row["id"],
                        turns,
                        [b for b, _ in pairs],
                        source,
                        lang=row.get("lang", "en"),
                        kinds=tuple(k for _, k in pairs) if row.get("kinds") else (),
                    )
                )
    return dialogues


#: What the embedded default's offline model (memory/llm/__init__.py) answers from its second
#: reply on: the same line under every question, none of the user's words.
OFFLINE_REPLY = (
    "Offline mode: no language model is configured, so I cannot answer that. "
    "Memory commands work offline: /remember, /forget, /note."
)


_FIRST_SENTENCE = re.compile(r".+?[.!?。！？](?=\s|$)", re.S)


def with_one_line_replies(dialogue: Dialogue) -> Dialogue:
    """The dialogue as a terse assistant would hold it: every reply cut to its first
    sentence (the one-line-reply regime, on dialogues written with paragraph replies)."""
    turns = []
    for turn in dialogue.turns:
        if turn.role == "assistant":
            found = _FIRST_SENTENCE.match(turn.text.strip())
            turn = Turn("assistant", found.group(0) if found else turn.text)
        turns.append(turn)
    return replace(dialogue, turns=turns)


def with_offline_replies(dialogue: Dialogue) -> Dialogue:
    """The dialogue as the embedded default would hold it: every reply the offline line."""
    turns = [
        t if t.role != "assistant" else Turn("assistant", OFFLINE_REPLY) for t in dialogue.turns
    ]
    return replace(dialogue, turns=turns)


# --------------------------------------------------------------------------- #
# The production loop
# --------------------------------------------------------------------------- #


def checkpoints(n_turns: int, interval: int, *, exit_check: bool = True) -> list[int]:
    """After which turn the fork loop runs: every ``interval``-th turn (the heartbeat),
    and with ``exit_check`` after the last turn too (the user leaves the page)."""
    points = list(range(interval, n_turns + 1, interval))
    if exit_check and n_turns and (not points or points[-1] != n_turns):
        points.append(n_turns)
    return points


def simulate(
    turns: Sequence[Turn],
    detector: DriftDetector,
    *,
    interval: int,
    scan_back: int,
    exit_check: bool = True,
) -> list[int]:
    """Boundaries (global turn indexes) that the fork loop produces for one dialogue.

    Turns arrive one at a time into the active topic. After every ``interval``-th
    turn of the dialogue, and after its last turn (the exit evaluation when the user
    leaves; ``exit_check=False`` leaves it out), the detector sees the active topic's
    whole thread; on
    drift the turns from its ``start`` on become the new active topic, which is
    judged again at once (as memory/actions/evaluation.py does), so one check may fork more
    than once; every fork stays inside the check's scan-back window. A start
    outside the contract raises, so a detector bug cannot hide in the scores.
    """
    boundaries: list[int] = []
    topic_start = 0
    for seen in checkpoints(len(turns), interval, exit_check=exit_check):
        window_start = seen - scan_back
        while True:
            active = turns[topic_start:seen]
            verdict = detector.detect(active, scan_back=scan_back)
            if not verdict.drifted:
                break
            start = verdict.start
            if start is None or not (
                1 <= start < len(active) and topic_start + start >= window_start
            ):
                raise ValueError(
                    f"{detector.name}: start {start} outside the window of {len(active)}"
                )
            topic_start += start
            boundaries.append(topic_start)
    return boundaries


# --------------------------------------------------------------------------- #
# Scoring
# --------------------------------------------------------------------------- #


def window_size(n_turns: int, reference: Sequence[int]) -> int:
    """k: half the mean reference segment length (rounded half up), at least 2."""
    mean_segment = n_turns / (len(reference) + 1)
    return max(2, math.floor(mean_segment / 2 + 0.5))


def _segment_ids(n_turns: int, boundaries: Sequence[int]) -> list[int]:
    """Segment number of each turn; a boundary b means turn b opens a segment."""
    opening = set(boundaries)
    ids, current = [], 0
    for index in range(n_turns):
        current += index in opening
        ids.append(current)
    return ids


def pk(n_turns: int, reference: Sequence[int], hypothesis: Sequence[int]) -> float:
    """Share of probe pairs (i, i+k) on which reference and hypothesis disagree
    about "same segment" (Beeferman et al., 1999)."""
    k = window_size(n_turns, reference)
    probes = n_turns - k
    if probes <= 0:
        return 0.0
    ref, hyp = _segment_ids(n_turns, reference), _segment_ids(n_turns, hypothesis)
    errors = sum((ref[i] == ref[i + k]) != (hyp[i] == hyp[i + k]) for i in range(probes))
    return errors / probes


def window_diff(n_turns: int, reference: Sequence[int], hypothesis: Sequence[int]) -> float:
    """Share of windows (i, i+k] holding a different number of boundaries
    (Pevzner & Hearst, 2002)."""
    k = window_size(n_turns, reference)
    probes = n_turns - k
    if probes <= 0:
        return 0.0
    ref, hyp = _segment_ids(n_turns, reference), _segment_ids(n_turns, hypothesis)
    errors = sum((ref[i + k] - ref[i]) != (hyp[i + k] - hyp[i]) for i in range(probes))
    return errors / probes


def boundary_f1(references: Sequence[Sequence[int]], hypotheses: Sequence[Sequence[int]]) -> float:
    """F1 of exact boundary positions, all dialogues' boundaries pooled."""
    hits = sum(len(set(r) & set(h)) for r, h in zip(references, hypotheses, strict=True))
    predicted = sum(len(set(h)) for h in hypotheses)
    relevant = sum(len(set(r)) for r in references)
    if hits == 0:
        return 0.0
    precision, recall = hits / predicted, hits / relevant
    return 2 * precision * recall / (precision + recall)


def score(dialogues: Sequence[Dialogue], predictions: Sequence[Sequence[int]]) -> Scores:
    """Pk and WindowDiff averaged over dialogues, F1 pooled over boundaries, and the
    forks per dialogue that has a single subject."""
    pairs = list(zip(dialogues, predictions, strict=True))
    coherent = [p for d, p in pairs if not d.boundaries]
    return Scores(
        pk=sum(pk(len(d.turns), d.boundaries, p) for d, p in pairs) / len(pairs),
        wd=sum(window_diff(len(d.turns), d.boundaries, p) for d, p in pairs) / len(pairs),
        f1=boundary_f1([d.boundaries for d in dialogues], predictions),
        false_forks=sum(len(p) for p in coherent) / len(coherent) if coherent else 0.0,
        coherent=len(coherent),
    )


#: A switch counts as found when a fork lands within this many turns of it.
FOUND_TOLERANCE = 2


@dataclass
class Tally:
    switches: int = 0
    found: int = 0
    coherent: int = 0  # dialogues with a single subject
    false_forks: int = 0  # forks in those dialogues

    def as_json(self) -> dict[str, float]:
        out: dict[str, float] = {"switches": self.switches, "found": self.found}
        if self.switches:
            out["found_share"] = round(self.found / self.switches, 3)
        if self.coherent:
            out["coherent"] = self.coherent
            out["false_forks_per_coherent"] = round(self.false_forks / self.coherent, 3)
        return out


def switch_tallies(
    dialogues: Sequence[Dialogue], predictions: Sequence[Sequence[int]]
) -> tuple[dict[str, Tally], dict[str, Tally]]:
    """Switches found within :data:`FOUND_TOLERANCE` turns and false forks, by language
    and by kind of switch ("cue", "no_cue", "same_domain"; "coherent" for dialogues
    with a single subject)."""
    by_lang: dict[str, Tally] = {}
    by_kind: dict[str, Tally] = {}
    for dialogue, predicted in zip(dialogues, predictions, strict=True):
        lang = by_lang.setdefault(dialogue.lang, Tally())
        if not dialogue.boundaries:
            for tally in (lang, by_kind.setdefault("coherent", Tally())):
                tally.coherent += 1
                tally.false_forks += len(predicted)
        for boundary in dialogue.boundaries:
            found = any(abs(p - boundary) <= FOUND_TOLERANCE for p in predicted)
            for tally in (lang, by_kind.setdefault(dialogue.kind_of(boundary), Tally())):
                tally.switches += 1
                tally.found += found
    return by_lang, by_kind


def print_tallies(title: str, tallies: dict[str, Tally]) -> None:
    print(f"{title:<12} {'switches':>8} {'found':>6} {'share':>6} {'coherent':>8} {'ff/coh':>6}")
    for name in sorted(tallies):
        t = tallies[name]
        share = f"{t.found / t.switches:6.0%}" if t.switches else f"{'-':>6}"
        ff = f"{t.false_forks / t.coherent:6.2f}" if t.coherent else f"{'-':>6}"
        print(f"{name:<12} {t.switches:8d} {t.found:6d} {share} {t.coherent:8d} {ff}")


def run(
    dialogues: Sequence[Dialogue], detector: DriftDetector, *, interval: int, scan_back: int
) -> tuple[list[list[int]], Scores, float]:
    """Predictions, scores and wall-clock seconds of one detector over a data set."""
    began = time.perf_counter()
    predictions = [
        simulate(d.turns, detector, interval=interval, scan_back=scan_back) for d in dialogues
    ]
    return predictions, score(dialogues, predictions), time.perf_counter() - began


# --------------------------------------------------------------------------- #
# Fitting the lexical detector's weights
# --------------------------------------------------------------------------- #


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Solve a small dense linear system by Gaussian elimination with pivoting."""
    size = len(vector)
    rows = [row[:] + [value] for row, value in zip(matrix, vector, strict=True)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(col + 1, size):
            factor = rows[r][col] / rows[col][col]
            for c in range(col, size + 1):
                rows[r][c] -= factor * rows[col][c]
    solution = [0.0] * size
    for r in range(size - 1, -1, -1):
        tail = sum(rows[r][c] * solution[c] for c in range(r + 1, size))
        solution[r] = (rows[r][size] - tail) / rows[r][r]
    return solution


def fit_logistic(
    rows: Sequence[Sequence[float]], labels: Sequence[float], *, ridge: float = 1.0
) -> list[float]:
    """L2-regularised logistic regression by Newton's method (column 0 is the bias)."""
    width = len(rows[0])
    weights = [0.0] * width
    for _ in range(50):
        gradient = [ridge * w for w in weights]
        hessian = [[ridge if i == j else 0.0 for j in range(width)] for i in range(width)]
        gradient[0] = hessian[0][0] = 0.0  # the bias is not shrunk
        for x, y in zip(rows, labels, strict=True):
            p = 1.0 / (1.0 + math.exp(-sum(w * v for w, v in zip(weights, x, strict=True))))
            for i in range(width):
                gradient[i] += (p - y) * x[i]
                for j in range(width):
                    hessian[i][j] += p * (1.0 - p) * x[i] * x[j]
        hessian[0][0] += 1e-9
        step = _solve(hessian, gradient)
        weights = [w - s for w, s in zip(weights, step, strict=True)]
        if max(abs(s) for s in step) < 1e-7:
            break
    return weights


def fit_lexical_weights(dialogues: Sequence[Dialogue]) -> dict[str, float]:
    """Fit the lexical detector's cue weights: one example per turn after the first."""
    rows: list[list[float]] = []
    labels: list[float] = []
    names: list[str] = []
    for dialogue in dialogues:
        texts = [t.text for t in dialogue.turns]
        opening = set(dialogue.boundaries)
        for index, cues in subject_cues(texts, range(1, len(texts))).items():
            names = list(cues)
            rows.append([1.0, *cues.values()])
            labels.append(float(index in opening))
    weights = fit_logistic(rows, labels)
    return dict(zip(["bias", *names], (round(w, 4) for w in weights), strict=True))


def fit_report(path: str, scan_back: int) -> None:
    """Print fitted weights and the loop's Pk per threshold at both cadences."""
    dialogues = load_dialogues(path, roles="auto")
    weights = fit_lexical_weights(dialogues)
    print("LEXICAL_WEIGHTS =", json.dumps(weights, indent=4))
    print(f"{'threshold':>9} {'pk@1':>6} {'pk@10':>6} {'mean':>6} {'f1@1':>6}")
    for step in range(12, 25):
        threshold = step / 40
        detector = LexicalDetector(weights, threshold)
        at_1, at_10 = (
            run(dialogues, detector, interval=i, scan_back=scan_back)[1] for i in (1, 10)
        )
        mean = (at_1.pk + at_10.pk) / 2
        print(f"{threshold:9.3f} {at_1.pk:6.3f} {at_10.pk:6.3f} {mean:6.3f} {at_1.f1:6.3f}")


def exchange_examples(
    dialogues: Sequence[Dialogue], *, interval: int, scan_back: int
) -> tuple[list[dict[str, float]], list[float]]:
    """Exchange cues and labels of every candidate the detector would weigh.

    Each dialogue is replayed through the fork loop with the reference as the
    detector: it forks at a true boundary once the boundary's turn has been answered
    (the detector waits for the answer too), so every candidate is seen in the
    topic, window and with the following turns that the detector would see.
    """
    rows: list[dict[str, float]] = []
    labels: list[float] = []
    for dialogue in dialogues:
        opening = set(dialogue.boundaries)
        topic_start = 0
        for seen in checkpoints(len(dialogue.turns), interval):
            active = dialogue.turns[topic_start:seen]
            candidates = candidate_starts(len(active), scan_back)
            for index, cues in exchange_cues(active, candidates).items():
                if exchange_end(active, index)[1] or cues["announces_switch"]:
                    rows.append(cues)
                    labels.append(float(topic_start + index in opening))
            for index in candidates:
                if topic_start + index in opening and exchange_end(active, index)[1]:
                    topic_start += index
                    break
    return rows, labels


def fit_exchange_weights(dialogues: Sequence[Dialogue], *, scan_back: int) -> dict[str, float]:
    """Fit the exchange cue weights on the candidates of both cadences, 1 and 10."""
    rows: list[list[float]] = []
    labels: list[float] = []
    names: list[str] = []
    for interval in (1, 10):
        cues, found = exchange_examples(dialogues, interval=interval, scan_back=scan_back)
        for one in cues:
            names = list(one)
            rows.append([1.0, *one.values()])
        labels.extend(found)
    weights = fit_logistic(rows, labels)
    return dict(zip(["bias", *names], (round(w, 3) for w in weights), strict=True))


def fit_exchange_report(path: str, scan_back: int) -> None:
    """Print fitted exchange weights and the loop's scores per exchange threshold."""
    dialogues = load_dialogues(path, roles="auto")
    weights = fit_exchange_weights(dialogues, scan_back=scan_back)
    print("EXCHANGE_WEIGHTS =", json.dumps(weights, indent=4))
    print(f"{'threshold':>9} {'pk@1':>6} {'pk@10':>6} {'mean':>6} {'f1@1':>6} {'ff@1':>5}")
    for step in range(2, 15):
        threshold = step / 20
        detector = LexicalDetector(exchange_weights=weights, exchange_threshold=threshold)
        at_1, at_10 = (
            run(dialogues, detector, interval=i, scan_back=scan_back)[1] for i in (1, 10)
        )
        mean = (at_1.pk + at_10.pk) / 2
        print(
            f"{threshold:9.3f} {at_1.pk:6.3f} {at_10.pk:6.3f} {mean:6.3f} {at_1.f1:6.3f} "
            f"{at_1.false_forks:5.2f}"
        )
    print(f"(current EXCHANGE_THRESHOLD = {EXCHANGE_THRESHOLD})")


# --------------------------------------------------------------------------- #
# Command line
# --------------------------------------------------------------------------- #


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--data", help="dialogues to score (JSON lines)")
    what.add_argument("--fit", metavar="TRAIN", help="refit the per-turn weights on TRAIN")
    what.add_argument("--fit-exchange", metavar="TRAIN", help="refit the exchange weights on TRAIN")
    parser.add_argument("--detector", default="semantic")
    parser.add_argument("--interval", type=int, default=10, help="messages between checks")
    parser.add_argument("--scan-back", type=int, default=10)
    parser.add_argument("--out", help="write predicted boundaries here (JSON lines)")
    parser.add_argument(
        "--replies",
        choices=("as-is", "offline", "one-line"),
        default="as-is",
        help="keep the assistant's replies, replace each by the offline model's line, or "
        "cut each to its first sentence",
    )
    parser.add_argument(
        "--roles",
        choices=("auto", "labelled", "people"),
        default="auto",
        help="role labels as given, all people, or people for sources like TIAGE (auto)",
    )
    args = parser.parse_args(argv)
    if args.interval < 1 or args.scan_back < 1:
        parser.error("--interval and --scan-back must be at least 1")
    if args.fit:
        fit_report(args.fit, args.scan_back)
        return 0
    if args.fit_exchange:
        fit_exchange_report(args.fit_exchange, args.scan_back)
        return 0

    try:
        detector = get_detector(args.detector)
    except ValueError as error:
        parser.error(str(error))
    dialogues = load_dialogues(args.data, roles=args.roles)
    if args.replies == "offline":
        dialogues = [with_offline_replies(d) for d in dialogues]
    elif args.replies == "one-line":
        dialogues = [with_one_line_replies(d) for d in dialogues]
    predictions, scores, seconds = run(
        dialogues, detector, interval=args.interval, scan_back=args.scan_back
    )
    base_predictions, base, base_seconds = run(
        dialogues, get_detector("baseline"), interval=args.interval, scan_back=args.scan_back
    )
    print(
        f"{args.data}: {len(dialogues)} dialogues ({scores.coherent} with one subject), "
        f"interval {args.interval}, scan-back {args.scan_back}, roles {args.roles}, "
        f"replies {args.replies}"
    )
    print(f"{'detector':<12} {'Pk':>6} {'WinDiff':>7} {'F1':>6} {'ff/coh':>6} {'seconds':>8}")
    for name, s, took in ((detector.name, scores, seconds), ("baseline", base, base_seconds)):
        ff = f"{s.false_forks:6.2f}" if s.coherent else f"{'-':>6}"
        print(f"{name:<12} {s.pk:6.3f} {s.wd:7.3f} {s.f1:6.3f} {ff} {took:8.1f}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            for dialogue, boundaries in zip(dialogues, predictions, strict=True):
                handle.write(json.dumps({"id": dialogue.id, "boundaries": boundaries}) + "\n")
    by_lang, by_kind = switch_tallies(dialogues, predictions)
    base_lang, base_kind = switch_tallies(dialogues, base_predictions)
    print(f"switches found within ±{FOUND_TOLERANCE} turns ({detector.name}; baseline below)")
    print_tallies("language", by_lang)
    print_tallies("kind", by_kind)
    print("baseline:")
    print_tallies("language", base_lang)
    print_tallies("kind", base_kind)
    print(json.dumps(summary_of(args, detector.name, (scores, base), by_lang, by_kind, base_lang)))
    return 0


def summary_of(args, detector: str, scored: tuple, by_lang: dict, by_kind: dict, base_lang: dict):
    """The last JSON line: the detector's scores and the baseline's, and the switches found."""
    scores, base = scored
    switches = sum(t.switches for t in by_lang.values())
    summary = {
        "bench": "drift_quality",
        "data": args.data,
        "detector": detector,
        "interval": args.interval,
        "replies": args.replies,
        "pk": round(scores.pk, 4),
        "wd": round(scores.wd, 4),
        "f1": round(scores.f1, 4),
        "baseline": {"pk": round(base.pk, 4), "wd": round(base.wd, 4), "f1": round(base.f1, 4)},
    }
    summary["found"] = {
        "switches": switches,
        "found": sum(t.found for t in by_lang.values()),
        "tolerance": FOUND_TOLERANCE,
        "by_kind": {name: t.as_json() for name, t in sorted(by_kind.items())},
        "baseline": sum(t.found for t in base_lang.values()),
    }
    summary["by_lang"] = {name: t.as_json() for name, t in sorted(by_lang.items())}
    if scores.coherent:
        summary["false_forks_per_coherent"] = round(scores.false_forks, 3)
        summary["baseline"]["false_forks_per_coherent"] = round(base.false_forks, 3)
    return summary


if __name__ == "__main__":
    sys.exit(main())
