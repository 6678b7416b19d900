"""Consolidation's subject similarity: the thresholds of memory/actions/consolidation/rules.py.

Usage (from the repository root)::

    python -m bench.consolidation.similarity [--fixture bench/data/consolidation-scope.jsonl]

Every pair of entries of the fixture is labelled by its ``key``: the same key is one
subject. The keys, sorted, are split by parity: the even ones are the tune half, the odd
ones the test half (a pair is in a half when both its entries are). On the tune half it
chooses the two thresholds the way the module's docstring says (the merge check: the best
true-positive rate less false-positive rate, the lowest of equals; the offline pass: the
lowest at which every accepted pair is one subject), then scores on the test half the
thresholds the product uses (the offline pass also asks ``MIN_SHARED_TERMS``
shared terms): precision and recall of "same subject", the share of
different subjects told apart (specificity) and, for the merge check, the precision a
model would see if it proposed as many unrelated merges as related ones (a 1:1 prior;
the fixture's pairs are 3 % one subject). The ``group`` rows score the rule that puts two
entries in one group for a model to consider (the merge threshold with two shared terms,
or one shared term and a cosine of at least ``ONE_TERM_THRESHOLD``, chosen on the tune half
as the lowest that loses no precision against asking two terms always), for reading.
Pairs in different scripts are left out (the check leaves them to the model) and counted.
A last row per check scores every pair of the fixture (both halves and the pairs across
them), for reading only.

Prints a table and a last JSON line ``{"bench": "consolidation_similarity", ...}``.
Targets (test half): the merge check keeps recall >= 0.85 and specificity >= 0.9 (1:1
precision >= 0.9); the offline pass has precision >= 0.9; the thresholds the product uses
are the ones measured on the tune half. A missed target exits non-zero. No Django, no
database.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from memory.actions.consolidation import (
    MIN_SHARED_TERMS,
    NEAR_DUPLICATE_THRESHOLD,
    ONE_TERM_THRESHOLD,
    SAME_SUBJECT_THRESHOLD,
    entry_text,
)
from memory.text.stats import subject_overlap

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "consolidation-scope.jsonl"
GRID = [round(step / 100, 2) for step in range(1, 100)]
OFFLINE_RULE = {"min_shared": MIN_SHARED_TERMS}
TARGETS = {"merge_recall": 0.85, "merge_specificity": 0.9, "offline_precision": 0.9}


@dataclass(frozen=True)
class Pair:
    same: bool
    similarity: float
    shared: int  # distinct subject terms in common


def halves(entries: list[dict]) -> tuple[list[dict], list[dict]]:
    keys = sorted({entry["key"] for entry in entries})
    tune = {key for index, key in enumerate(keys) if index % 2 == 0}
    return (
        [entry for entry in entries if entry["key"] in tune],
        [entry for entry in entries if entry["key"] not in tune],
    )


def pairs(entries: list[dict]) -> tuple[list[Pair], int]:
    """The comparable pairs of ``entries``, and how many were in different scripts."""
    kept, skipped = [], 0
    for first, second in itertools.combinations(entries, 2):
        overlap = subject_overlap(
            entry_text(first["title"], first["summary"]),
            entry_text(second["title"], second["summary"]),
        )
        if overlap is None:
            skipped += 1
        else:
            kept.append(Pair(first["key"] == second["key"], *overlap))
    return kept, skipped


def score(
    pairs_: list[Pair], threshold: float, *, min_shared: int = 1, one_term: float | None = None
) -> dict:
    """How well "similarity >= threshold (sharing min_shared terms, or one term with a
    similarity of at least one_term)" tells one subject."""
    same = [pair for pair in pairs_ if pair.same]
    different = [pair for pair in pairs_ if not pair.same]

    def accepts(pair: Pair) -> bool:
        if pair.similarity < threshold:
            return False
        return pair.shared >= min_shared or (one_term is not None and pair.similarity >= one_term)

    true_pos = sum(map(accepts, same))
    false_pos = sum(map(accepts, different))
    recall = true_pos / len(same) if same else 0.0
    fp_rate = false_pos / len(different) if different else 0.0
    accepted = true_pos + false_pos
    return {
        "threshold": threshold,
        "precision": round(true_pos / accepted, 3) if accepted else 1.0,
        "recall": round(recall, 3),
        "specificity": round(1 - fp_rate, 3),
        "precision_1to1": round(recall / (recall + fp_rate), 3) if recall + fp_rate else 1.0,
        "youden": round(recall - fp_rate, 3),
        "same_pairs": len(same),
        "different_pairs": len(different),
    }


def choose_merge_threshold(pairs_: list[Pair]) -> float:
    """The best recall less false-positive rate; of equals, the lowest (defers to the model)."""
    best = max(score(pairs_, t)["youden"] for t in GRID)
    return min(t for t in GRID if score(pairs_, t)["youden"] == best)


def choose_one_term_threshold(pairs_: list[Pair]) -> float:
    """For the groups a model is shown: the lowest cosine at which a pair sharing one term
    joins a group without losing precision against sharing two terms always."""
    strict = score(pairs_, SAME_SUBJECT_THRESHOLD, **OFFLINE_RULE)["precision"]
    return min(
        t
        for t in GRID
        if t >= SAME_SUBJECT_THRESHOLD
        and score(pairs_, SAME_SUBJECT_THRESHOLD, **OFFLINE_RULE, one_term=t)["precision"] >= strict
    )


def choose_offline_threshold(pairs_: list[Pair]) -> float:
    """The lowest threshold at which every accepted pair is one subject."""
    return min(t for t in GRID if score(pairs_, t, **OFFLINE_RULE)["precision"] == 1.0)


def run(path: Path) -> dict:
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    tune, test = halves(entries)
    tune_pairs, tune_skipped = pairs(tune)
    test_pairs, test_skipped = pairs(test)
    all_pairs, _ = pairs(entries)  # both halves and the pairs across them: for reading only
    chosen = {
        "merge": choose_merge_threshold(tune_pairs),
        "offline": choose_offline_threshold(tune_pairs),
        "one_term": choose_one_term_threshold(tune_pairs),
    }
    used = {
        "merge": SAME_SUBJECT_THRESHOLD,
        "offline": NEAR_DUPLICATE_THRESHOLD,
        "one_term": ONE_TERM_THRESHOLD,
    }
    # "group": the rule that puts entries in one group for a model to consider (the merge
    # threshold, and two shared terms or one with a high cosine), scored for reading.
    used_by = {**used, "group": SAME_SUBJECT_THRESHOLD}
    group_rule = {**OFFLINE_RULE, "one_term": ONE_TERM_THRESHOLD}
    rules = {"merge": {}, "offline": OFFLINE_RULE, "group": group_rule}
    rows = {
        f"{check} {half}": score(half_pairs, used_by[check], **rules[check])
        for check in ("merge", "offline", "group")
        for half, half_pairs in (("tune", tune_pairs), ("test", test_pairs), ("all", all_pairs))
    }
    merge, offline = rows["merge test"], rows["offline test"]
    targets = {
        "merge_recall": merge["recall"] >= TARGETS["merge_recall"],
        "merge_specificity": merge["specificity"] >= TARGETS["merge_specificity"],
        "merge_precision_1to1": merge["precision_1to1"] >= 0.9,
        "offline_precision": offline["precision"] >= TARGETS["offline_precision"],
        "thresholds_as_measured": chosen == used,
    }
    return {
        "rows": rows,
        "chosen_on_tune": chosen,
        "used": used,
        "skipped_different_scripts": {"tune": tune_skipped, "test": test_skipped},
        "entries": {"tune": len(tune), "test": len(test)},
        "targets": targets,
    }


def report(result: dict) -> None:
    columns = ["threshold", "precision", "recall", "specificity", "precision_1to1"]
    print("| check, half | " + " | ".join(columns) + " | same pairs | different pairs |")
    print("|---|" + "---:|" * (len(columns) + 2))
    for name, row in result["rows"].items():
        cells = [str(row[column]) for column in columns]
        cells += [str(row["same_pairs"]), str(row["different_pairs"])]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        f"\nchosen on the tune half: {result['chosen_on_tune']}; used: {result['used']}; "
        f"pairs in different scripts left to the model: {result['skipped_different_scripts']}"
    )
    targets = result["targets"].items()
    print("targets: " + ", ".join(f"{k} {'met' if ok else 'MISSED'}" for k, ok in targets))
    print(
        json.dumps(
            {
                "bench": "consolidation_similarity",
                **result,
                "pass": all(result["targets"].values()),
            },
            ensure_ascii=False,
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    args = parser.parse_args()
    result = run(args.fixture)
    report(result)
    return 0 if all(result["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
