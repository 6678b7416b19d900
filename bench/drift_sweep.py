"""Sweep of the semantic detector's one-line-reply settings (memory/drift/semantic.py
``SHORT_*``, or with ``--opening`` the two cues' ``OPENING_*`` and ``SHORT_MESSAGE_TERMS``):
switches found and false forks on a tune file as it is and with every reply cut to its
first sentence, and the Pk on a public set beside each row (a set whose score must stay
under a published one, not a set to fit).

With ``--confirm`` it sweeps ``UNCONFIRMED_PENALTY`` (and ``SHORT_CENTRE``) instead, on the
tune file at heartbeats of 6 to 14 messages (switches found and false forks summed over
the five): a rule chosen at one heartbeat alone fits where that heartbeat happens to fall
in each dialogue (the third round forked once at 10 and 6 to 11 times at the others).
``--confirm-short`` sweeps the one-line talks' ``SHORT_UNCONFIRMED_PENALTY`` and
``SHORT_CENTRE`` the same way.

    python -m bench.drift_sweep bench/data/product-tune.jsonl \
        [--check $DRIFT_DATA/superdialseg-validation.jsonl] [--interval 10] \
        [--opening | --confirm]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import replace

from bench.drift_quality import (
    Dialogue,
    Tally,
    load_dialogues,
    run,
    switch_tallies,
    with_one_line_replies,
)
from memory.drift.detectors import Turn
from memory.drift.semantic import SemanticDetector, turn_vectors


def with_vectors(dialogues: Sequence[Dialogue]) -> list[Dialogue]:
    """The dialogues with every turn's sentence vector attached (embedded once, as the
    product stores them), so that a sweep never embeds a text twice."""
    out = []
    for dialogue in dialogues:
        vectors = turn_vectors(dialogue.turns)
        turns = [
            Turn(t.role, t.text, vector=v) for t, v in zip(dialogue.turns, vectors, strict=True)
        ]
        out.append(replace(dialogue, turns=turns))
    return out


SHORT_GRID = [None] + [
    (weight, centre, norm)
    for norm in (0.0, 1.0)
    for weight in (4.0, 8.0, 12.0)
    for centre in (0.25, 0.3, 0.325, 0.35)
]


#: (centre, young topic's centre, subject words up to which a line needs two cues); None:
#: one cue may fork (the second round of issue 46).
OPENING_GRID = [None] + [
    (centre, young, terms)
    for terms in (2, 3)
    for centre in (0.25, 0.3)
    for young in (0.2, 0.25, 0.275, 0.3)
]


#: (penalty of an unconfirmed candidate, SHORT_CENTRE); None: the third round (no penalty,
#: centre 0.325).
CONFIRM_GRID = [None] + [(penalty, 0.325) for penalty in (1.0, 2.0, 3.0, 4.0, 6.0, 10.0)]
#: (penalty of an answered unconfirmed question in a one-line talk, SHORT_CENTRE); None: the
#: fourth round (no such penalty, centre 0.325).
SHORT_CONFIRM_GRID = [None] + [
    (penalty, centre) for centre in (0.325, 0.335, 0.35) for penalty in (1.0, 2.0, 3.0)
]
#: Heartbeats the --confirm sweep sums over: even, so a check follows a reply, as in use.
HEARTBEATS = (6, 8, 10, 12, 14)


def _confirm_detectors(short: bool):
    """(detector, the setting's cells) for every row of the --confirm or --confirm-short grid."""
    if short:
        for setting in SHORT_CONFIRM_GRID:
            if setting is None:
                fourth_round = {"short_unconfirmed_penalty": None, "short_centre": 0.325}
                yield SemanticDetector(**fourth_round), ["off", "0.325"]
            else:
                penalty, centre = setting
                detector = SemanticDetector(short_unconfirmed_penalty=penalty, short_centre=centre)
                yield detector, [f"{penalty:.1f}", f"{centre:.3f}"]
        return
    third_round = {"short_unconfirmed_penalty": None}
    for setting in CONFIRM_GRID:
        if setting is None:
            detector = SemanticDetector(unconfirmed_penalty=None, short_centre=0.325, **third_round)
            yield detector, ["off", "0.325"]
        else:
            penalty, centre = setting
            detector = SemanticDetector(
                unconfirmed_penalty=penalty, short_centre=centre, **third_round
            )
            yield detector, [f"{penalty:.1f}", f"{centre:.3f}"]


def sweep_confirm_report(
    path: str, check: str | None, *, scan_back: int, short: bool = False
) -> None:
    """For each (penalty, centre): switches found (English, other languages) and false
    forks on ``path`` summed over :data:`HEARTBEATS`, and the Pk on ``check`` at 10."""
    tune = with_vectors(load_dialogues(path))
    public = with_vectors(load_dialogues(check)) if check else []
    print(" ".join(f"{name:>8}" for name in ("penalty", "centre", "en", "other", "ff", "check")))
    for detector, row in _confirm_detectors(short):
        english, others, false_forks, coherent = Tally(), Tally(), 0, 0
        for interval in HEARTBEATS:
            predictions, scores, _ = run(tune, detector, interval=interval, scan_back=scan_back)
            for lang, tally in switch_tallies(tune, predictions)[0].items():
                into = english if lang == "en" else others
                into.found, into.switches = into.found + tally.found, into.switches + tally.switches
                false_forks += tally.false_forks
            coherent += scores.coherent
        row += [f"{t.found}/{t.switches}" for t in (english, others)] + [
            f"{false_forks}/{coherent}"
        ]
        checked = (
            run(public, detector, interval=10, scan_back=scan_back)[1].pk if public else math.nan
        )
        print(" ".join(f"{cell:>8}" for cell in row), f"{checked:8.3f}", flush=True)


def _detectors(opening: bool):
    """(detector, the setting's cells) for every row of the chosen grid."""
    if opening:
        for setting in OPENING_GRID:
            if setting is None:
                second_round = {
                    "unconfirmed_penalty": None,
                    "short_unconfirmed_penalty": None,
                    "short_centre": 0.325,
                }
                yield SemanticDetector(agreement=False, **second_round), ["off", "", ""]
            else:
                centre, young, terms = setting
                detector = SemanticDetector(opening_centres=(centre, young), message_terms=terms)
                yield detector, [f"{centre:.3f}", f"{young:.3f}", f"{terms}"]
        return
    for setting in SHORT_GRID:
        if setting is None:  # one-line replies read as any others: the detector before
            yield SemanticDetector(one_line=False, unconfirmed_penalty=None), ["off", "", ""]
        else:
            weight, centre, norm = setting
            detector = SemanticDetector(short_weight=weight, short_centre=centre, short_norm=norm)
            yield detector, [f"{weight:.1f}", f"{centre:.3f}", f"{norm:.1f}"]


def sweep_short_report(
    path: str, check: str | None, *, interval: int, scan_back: int, opening: bool = False
) -> None:
    """For each one-line-reply setting: switches found and false forks on ``path`` as it
    is and with every reply cut to its first sentence, and the Pk on ``check``."""
    tune = with_vectors(load_dialogues(path))
    terse = with_vectors([with_one_line_replies(d) for d in load_dialogues(path)])
    public = with_vectors(load_dialogues(check)) if check else []
    setting = ("centre", "young", "terms") if opening else ("weight", "centre", "norm")
    head = (*setting, "en", "other", "ff", "1l en", "1l other", "1l ff")
    print(" ".join(f"{name:>8}" for name in (*head, "check")))
    for detector, row in _detectors(opening):
        for dialogues in (tune, terse):
            predictions, scores, _ = run(
                dialogues, detector, interval=interval, scan_back=scan_back
            )
            by_lang, _ = switch_tallies(dialogues, predictions)
            english = by_lang.get("en", Tally())
            others = [t for lang, t in by_lang.items() if lang != "en"]
            row += [
                f"{english.found}/{english.switches}",
                f"{sum(t.found for t in others)}/{sum(t.switches for t in others)}",
                f"{sum(t.false_forks for t in by_lang.values())}/{scores.coherent}",
            ]
        checked = (
            run(public, detector, interval=interval, scan_back=scan_back)[1].pk
            if public
            else math.nan
        )
        print(" ".join(f"{cell:>8}" for cell in row), f"{checked:8.3f}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tune", help="dialogues to choose on (JSON lines)")
    parser.add_argument("--check", help="a public set whose Pk is printed beside each row")
    parser.add_argument("--interval", type=int, default=10)
    parser.add_argument("--scan-back", type=int, default=10)
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--opening", action="store_true", help="sweep the two cues' settings (OPENING_*)"
    )
    which.add_argument(
        "--confirm",
        action="store_true",
        help="sweep UNCONFIRMED_PENALTY and SHORT_CENTRE over heartbeats 6 to 14",
    )
    which.add_argument(
        "--confirm-short",
        action="store_true",
        help="sweep SHORT_UNCONFIRMED_PENALTY and SHORT_CENTRE over heartbeats 6 to 14",
    )
    args = parser.parse_args(argv)
    if args.confirm or args.confirm_short:
        sweep_confirm_report(
            args.tune, args.check, scan_back=args.scan_back, short=args.confirm_short
        )
        return 0
    sweep_short_report(
        args.tune,
        args.check,
        interval=args.interval,
        scan_back=args.scan_back,
        opening=args.opening,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
