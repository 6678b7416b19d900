"""The drift and time-to-first-token parts of bench.real_model (see its docstring)."""

from __future__ import annotations

import http.client
import json
import statistics
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
REQUEST_TIMEOUT = 1800.0


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# --------------------------------------------------------------------------- #
# Drift with the model deciding
# --------------------------------------------------------------------------- #

DRIFT_IDS = ("product-test-01", "product-test-02", "product-test-03", "product-test-19")
DRIFT_IDS += ("product-test-28", "product-test-31")


def run_drift(ids: list[str], interval: int) -> dict:
    from django.conf import settings

    from bench import drift_quality as dq
    from memory.drift.detectors import get_detector
    from memory.drift.llm import LLMDriftDetector
    from memory.llm import get_chat_model

    every = dq.load_dialogues(ROOT / "bench" / "data" / "product-test.jsonl")
    dialogues = [d for d in every if d.id in ids]
    detectors = [get_detector("lexical"), LLMDriftDetector(get_chat_model("summary"))]
    table = {}
    for detector in detectors:
        predictions, scores, seconds = dq.run(
            dialogues, detector, interval=interval, scan_back=settings.DRIFT_SCAN_BACK
        )
        by_lang, by_kind = dq.switch_tallies(dialogues, predictions)
        table[detector.name] = {
            "pk": round(scores.pk, 3),
            "wd": round(scores.wd, 3),
            "f1": round(scores.f1, 3),
            "false_forks_per_coherent": round(scores.false_forks, 2) if scores.coherent else None,
            "found": sum(t.found for t in by_lang.values()),
            "switches": sum(t.switches for t in by_lang.values()),
            "by_kind": {
                k: f"{t.found}/{t.switches}" for k, t in sorted(by_kind.items()) if t.switches
            },
            "by_lang": {k: f"{t.found}/{t.switches}" for k, t in sorted(by_lang.items())},
            "seconds": round(seconds, 1),
        }
    return {"dialogues": [d.id for d in dialogues], "interval": interval, "detectors": table}


def print_drift(result: dict) -> None:
    print(
        f"\ndrift: {len(result['dialogues'])} dialogues of product-test, "
        f"interval {result['interval']}"
    )
    print(
        f"{'detector':<9} {'Pk':>6} {'WD':>6} {'F1':>6} {'found':>7} {'ff/coh':>6} "
        f"{'seconds':>8}  by kind; by language"
    )
    for name, row in result["detectors"].items():
        found = f"{row['found']}/{row['switches']}"
        print(
            f"{name:<9} {row['pk']:6.3f} {row['wd']:6.3f} {row['f1']:6.3f} {found:>7} "
            f"{fmt(row['false_forks_per_coherent'], 2):>6} {row['seconds']:8.1f}  "
            f"{row['by_kind']}; {row['by_lang']}"
        )


# --------------------------------------------------------------------------- #
# Time to first token: the product's append-only window against a sliding one
# --------------------------------------------------------------------------- #

CACHE_SYSTEM = (
    "You are Guide, a helpful assistant. Answer briefly and accurately.\n\n"
    "# What you know about the user\n- trip_dates: 3 to 10 April\n- partner: Ana, vegetarian\n"
    "- balcony: south-facing, 4 pots of tomatoes\n\n# Earlier topics\n"
    "- Kyoto trip planning: a quiet ryokan near the Philosopher's Path, booked for 3-10 April.\n"
    "- Python lists: removing duplicates while keeping order; chunking a list.\n"
)


def first_token_seconds(upstream: str, messages: list[dict], *, cache: bool) -> tuple[float, int]:
    """Seconds to the (only) token of a one-token answer, and the prompt tokens the
    server had to process (its ``timings.prompt_n``; the rest came from its cache)."""
    parts = urlsplit(upstream.rstrip("/"))
    body = {"model": "local", "messages": messages, "max_tokens": 1, "temperature": 0}
    body["cache_prompt"] = cache
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=REQUEST_TIMEOUT)
    began = time.monotonic()
    connection.request(
        "POST",
        f"{parts.path}/chat/completions",
        json.dumps(body),
        {"Content-Type": "application/json"},
    )
    answer = json.loads(connection.getresponse().read())
    seconds = time.monotonic() - began
    connection.close()
    return seconds, int((answer.get("timings") or {}).get("prompt_n") or -1)


def cache_conversation(turns: int) -> list[dict]:
    from bench import drift_quality as dq

    messages: list[dict] = []
    for dialogue in dq.load_dialogues(ROOT / "bench" / "data" / "product-test.jsonl"):
        for turn in dialogue.turns:
            if (turn.role == "user") == (len(messages) % 2 == 0):
                messages.append({"role": turn.role, "content": turn.text})
        if len(messages) >= 2 * turns:
            break
    return messages[: 2 * turns]


def run_cache(upstream: str, turns: int, window: int, cold_samples: int) -> dict:
    conversation = cache_conversation(turns)
    system = [{"role": "system", "content": CACHE_SYSTEM}]
    prompts = [conversation[: 2 * t + 1] for t in range(turns)]  # each ends with a user turn
    modes = {"product": [], "sliding": [], "cold": []}
    processed = {"product": [], "sliding": [], "cold": []}
    for prompt in prompts:
        seconds, n = first_token_seconds(upstream, system + prompt, cache=True)
        modes["product"].append(seconds)
        processed["product"].append(n)
    for prompt in prompts:
        seconds, n = first_token_seconds(upstream, system + prompt[-window:], cache=True)
        modes["sliding"].append(seconds)
        processed["sliding"].append(n)
    for prompt in prompts[-cold_samples:]:
        seconds, n = first_token_seconds(upstream, system + prompt, cache=False)
        modes["cold"].append(seconds)
        processed["cold"].append(n)
    medians = {name: statistics.median(values) for name, values in modes.items() if values}
    steady = modes["product"][1:] or modes["product"]
    return {
        "turns": turns,
        "sliding_window_messages": window,
        "median_seconds": {k: round(v, 2) for k, v in medians.items()},
        "product_after_first_median": round(statistics.median(steady), 2),
        "median_prompt_tokens_processed": {
            k: statistics.median(v) for k, v in processed.items() if v
        },
        "ratio_sliding_over_product": round(medians["sliding"] / statistics.median(steady), 2),
        "ratio_cold_over_product": round(medians["cold"] / statistics.median(steady), 2),
        "seconds": {k: [round(x, 2) for x in v] for k, v in modes.items()},
    }


def print_cache(result: dict) -> None:
    print(
        f"\ntime to first token: {result['turns']} turns, sliding window of "
        f"{result['sliding_window_messages']} messages"
    )
    print(f"{'window':<10} {'median s':>9} {'prompt tokens processed (median)':>34}")
    for name, median in result["median_seconds"].items():
        print(f"{name:<10} {median:9.2f} {result['median_prompt_tokens_processed'][name]:>34}")
    print(f"  product median after its first turn: {result['product_after_first_median']} s")
    print(
        f"  ratio of medians sliding / product: {result['ratio_sliding_over_product']}, "
        f"cold / product: {result['ratio_cold_over_product']}"
    )
