"""Does promotion mean something? ``python -m bench.summary_quality``

    OPENAI_BASE_URL=http://127.0.0.1:8081/v1 python -m bench.summary_quality \\
        [--data bench/data/summary-labels-test.jsonl] [--threshold T | --flag-alone] \\
        [--ids sum-05,sum-06] [--per-stratum N] [--second-look-only]

Runs the product's own summary call and the second look (memory/actions/promotion.py: the
sentence encoder over the user's messages) on each labelled conversation
(bench/data/README.md) through bench/summary_labels.py, the code the summary part of
``bench.real_model`` runs too, and prints:

* agreement of the decision with the label: overall, per language, per label (durable /
  casual), for the kept design (the summary's strict flag, looked at again at
  ``--threshold``) beside the baseline in the same run (the summary's flag alone);
* agreement at other thresholds (for choosing one on the tune half only);
* JSON validity, and faithfulness: durable conversations whose summary holds every
  ``keep`` word;
* a last JSON line.

It exits 1 when the kept design agrees with fewer than 80 % of the labels on the data
given. Choose on ``summary-labels-tune.jsonl``; report on ``summary-labels-test.jsonl``
once. ``--second-look-only`` needs no model (no summary call: the flag is taken as true).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from bench.common import setup_django
from bench.summary_labels import decision, load_labels, ratio, run_labels

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.80
SWEEP = (-0.04, -0.02, -0.01, 0.0, 0.005, 0.01, 0.02, 0.04)


def agreement(rows: list[dict], decide) -> tuple[int, int]:
    return sum(decide(r) == r["durable"] for r in rows), len(rows)


def pct(part: int = 0, whole: int = 0) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else "-"


def breakdown(rows: list[dict], decide) -> dict:
    """Agreement per language and per label."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[f"lang {row['lang']}"].append(row)
        groups["durable" if row["durable"] else "casual"].append(row)
    return {name: agreement(group, decide) for name, group in sorted(groups.items())}


def report(rows: list[dict], threshold: float | None) -> dict:
    def kept(row):
        return decision(row, threshold)

    def flag(row):
        return decision(row, None)

    valid = [r for r in rows if r["valid"]]
    durable = [r for r in valid if r["durable"]]
    flagged = [r for r in rows if r["include"] is not None]  # none with --second-look-only
    result = {
        "conversations": len(rows),
        "valid_json": ratio(len(valid), len(rows)) if flagged else "-",
        "faithful_on_durable": (
            ratio(sum(bool(r.get("kept")) for r in durable), len(durable)) if flagged else "-"
        ),
        "threshold": threshold,
        "agreement": agreement(rows, kept),
        "agreement_flag_alone": agreement(rows, flag) if flagged else None,
        "by_group": breakdown(rows, kept),
        "by_group_flag_alone": breakdown(rows, flag) if flagged else None,
    }
    if threshold is not None:
        result["sweep"] = {str(t): agreement(rows, lambda r, t=t: decision(r, t)) for t in SWEEP}
    return result


def print_report(result: dict) -> None:
    threshold = result["threshold"]
    design = "flag alone" if threshold is None else f"second look >= {threshold}"
    if result["agreement_flag_alone"] is None:
        design += " (look only)"
    print(f"\npromotion against the labels: {result['conversations']} conversations")
    print(f"  valid JSON                 {result['valid_json']}")
    print(f"  faithful (keep words)      {result['faithful_on_durable']} durable summaries")
    print(f"  {'':<24} {'kept design':>26} {'baseline':>16}")
    print(f"  {'design':<24} {design:>26} {'summary flag':>16}")
    baseline = result["by_group_flag_alone"] or {}
    print(
        f"  {'overall':<24} {pct(*result['agreement']):>26} "
        f"{pct(*(result['agreement_flag_alone'] or ())):>16}"
    )
    for name, value in result["by_group"].items():
        print(f"  {name:<24} {pct(*value):>26} {pct(*baseline.get(name, ())):>16}")
    if "sweep" in result:
        print(f"\n  {'threshold':<10} {'agreement':>16}")
        for t, value in result["sweep"].items():
            print(f"  {t:<10} {pct(*value):>16}")


def print_row(row: dict) -> None:
    score = "-" if row["score"] is None else f"{row['score']:+.3f}"
    print(
        f"  {row['id']:<8} {row['lang']} durable={row['durable']!s:<5} "
        f"flag={row['include']!s:<5} look={score:<6} kept={row.get('kept', '-')!s:<5} "
        f"{row['seconds']:5.1f}s {row.get('error', '')}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.summary_quality", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", default=str(ROOT / "bench/data/summary-labels-test.jsonl"))
    parser.add_argument("--ids", default="", help="only these conversations (comma-separated)")
    parser.add_argument("--per-stratum", type=int, default=0, help="first N per (lang, label)")
    parser.add_argument("--threshold", type=float, default=None, help="the second look's")
    parser.add_argument("--flag-alone", action="store_true", help="the summary's flag alone")
    parser.add_argument(
        "--second-look-only", action="store_true", help="no summary call (no model needed)"
    )
    args = parser.parse_args(argv)
    if not os.environ.get("OPENAI_BASE_URL") and not args.second_look_only:
        parser.error("set OPENAI_BASE_URL to the model's endpoint (e.g. the local lane's)")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ.setdefault("DRIFTLESS_VAR_DIR", tempfile.mkdtemp(prefix="driftless-summary-"))
    os.environ.setdefault("OPENAI_API_KEY", "not-needed")
    setup_django()
    from memory.actions.promotion import THRESHOLD

    threshold = (
        None if args.flag_alone else (THRESHOLD if args.threshold is None else args.threshold)
    )
    ids = [i.strip() for i in args.ids.split(",") if i.strip()]
    items = load_labels(Path(args.data), ids=ids, per_stratum=args.per_stratum)
    print(f"{len(items)} conversations from {args.data}", flush=True)
    rows = run_labels(
        items,
        second_look=threshold is not None,
        summary=not args.second_look_only,
        progress=print_row,
    )
    result = report(rows, threshold)
    print_report(result)
    right, total = result["agreement"]
    share = right / total if total else 0.0
    summary = {
        "bench": "summary_quality",
        "data": Path(args.data).name,
        "ids": [r["id"] for r in rows],
        "agreement": round(share, 3),
        "target": TARGET,
        **{k: v for k, v in result.items()},
        "rows": rows,
    }
    print(json.dumps(summary, ensure_ascii=False))
    return 0 if share >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
