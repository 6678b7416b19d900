"""Consolidation benchmark: a scope grown over 100 sessions, with and without consolidation.

Usage (from the repository root)::

    python -m bench.consolidation [--sessions 100] [--every 10] [--budget 1500]
    python -m bench.consolidation --real [--base-url URL] --sessions 40   # a real model
    python -m bench.consolidation --offline   # also a third user: the model-free pass

The fixture, ``bench/data/consolidation-scope.jsonl``, is one promoted memory entry a
line, in the order the sessions made them: repeated subjects (entries sharing a ``key``:
duplicates), reversals (a later entry of the same key with another ``value``, linked by
``reverses`` to the entries it reverses), small talk (``small_talk``, promoted as a real
summarizer does), and entries the user curated (``curated``: promoted or deprecated by
the user, or their own edit). Two users of one agent live the same 100 sessions in one
run: ``without`` only grows; ``with`` also runs the consolidator (the real
memory/actions/consolidation/run.py, the real ``openai`` client) every ``--every`` sessions.

The model. By default a scripted one, deterministic: the fake OpenAI-compatible server of
the test suite answers from the fixture's labels (each entry's subject is named by its key;
the entries of one key are merged into the newest; an entry reversed by a later one is
superseded by it). It is naive on purpose
about the user's curation (it proposes to merge away, rewrite or supersede curated entries
too), so the guard is exercised: those proposals must be refused. It measures the
mechanics (what reaches the block, what is refused, what the budget drops), not the
judgement of a model. ``--real`` asks an OpenAI-compatible endpoint (a local model lane)
instead; serialize it with the machine's model lock when there is one, and keep it small
(``--sessions 40``: four consolidations). ``--offline`` adds a third user of the same
sessions consolidated by the model-free pass (memory/actions/consolidation/rules.py: no
model, near-duplicates merged, never a supersede), reported as its own row.

It reports, for the block a new session of each scope reads: entries in the block, its
tokens, duplicates left (asserted entries beyond the first of one key), reversed decisions
still asserted (an entry a later one reversed, shown without ``[DEPRECATED]``), entries lost
to the budget (FIFO), subjects missing from the block, and curated entries changed; then
each merge applied that joined entries of different labelled subjects (a small-talk entry
is a subject of its own: a pun about databases merged into the ledger decision is one),
with who proposed it, and each merge of one subject refused as ``unrelated`` (what the
checks cost); then a last JSON line ``{"bench": "consolidation", ...}``. Targets:
duplicates left and reversed still asserted at most 10 % of what they are without
consolidation; no curated entry changed; the block within its budget; no more subjects
missing than without; no merge of two subjects; with ``--offline``, the model-free pass
also leaves fewer duplicates than without, supersedes nothing, changes no curated entry,
keeps the block within budget and misses no more subjects than without (its merges of two
subjects are reported, not a target: text statistics alone, whose precision is
bench.consolidation.similarity's). A missed target exits non-zero. It runs on a
throwaway SQLite database and the in-process cache.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import embedded_django

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "consolidation-scope.jsonl"
TARGET_SHARE = 0.10
REAL_TIMEOUT_SECONDS = 900.0


def configure() -> str:
    return embedded_django("bench-consolidation-")


def load_fixture(path: Path, sessions: int) -> list[dict]:
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [entry for entry in entries if entry["session"] <= sessions]


# --- growing a scope ---------------------------------------------------------------------------


class Scope:
    """One user's scope with the agent, grown session by session from the fixture."""

    def __init__(self, *, agent, username: str) -> None:
        from django.contrib.auth import get_user_model

        self.agent = agent
        self.user = get_user_model().objects.create_user(username=username)
        agent.organization.members.add(self.user)
        self.label: dict[int, dict] = {}  # topic id → fixture entry
        self.curated: dict[int, dict] = {}  # topic id → its fields when the user curated it

    def grow(self, session_number: int, entries: list[dict]) -> None:
        from memory.models import Session, Topic
        from memory.stores.consolidation import topic_fields
        from memory.stores.persistent import invalidate_persistent_memory

        session = Session.objects.start(user=self.user, agent=self.agent)
        for minute, entry in enumerate(entries):
            day = datetime.fromisoformat(entry["day"]).replace(tzinfo=UTC)
            curated = entry.get("curated")
            topic = Topic.objects.create(
                session=session,
                title=entry["title"],
                summary=entry["summary"],
                keep_in_memory=curated != "deprecated",
                deprecated=curated == "deprecated",
                keep_in_memory_manually_set=curated == "promoted",
                deprecated_manually_set=curated == "deprecated",
                summary_manually_set=curated == "edited",
                memory_changed_at=day + timedelta(minutes=minute),
                is_active=False,
                origin=Topic.Origin.USER,
            )
            self.label[topic.pk] = entry
            if curated:
                self.curated[topic.pk] = topic_fields(topic)
        # As a promotion does: the block a consolidation read and cached is stale now.
        invalidate_persistent_memory(session.memory_scope_key)

    def measure(self, *, reversed_ids: set[str]) -> dict:
        from memory.models import Session, Topic
        from memory.stores.consolidation import topic_fields
        from memory.stores.persistent import scope_memory_entries, truncate_to_budget

        probe = Session(agent=self.agent, user=self.user, organization=self.agent.organization)
        entries = scope_memory_entries(session=probe)
        block = truncate_to_budget(entries, budget=self.agent.memory_token_budget)
        asserted = [self.label[e.topic_id] for e in block.entries if not e.deprecated]
        keys = Counter(entry["key"] for entry in asserted if not entry["small_talk"])
        grown_keys = {entry["key"] for entry in self.label.values() if not entry["small_talk"]}
        topics = Topic.objects.in_bulk(list(self.curated))
        changed = sum(topic_fields(topics[pk]) != fields for pk, fields in self.curated.items())
        return {
            "entries_in_block": len(block.entries),
            "block_tokens": block.tokens,
            "duplicates_left": sum(count - 1 for count in keys.values()),
            "reversed_still_asserted": sum(entry["id"] in reversed_ids for entry in asserted),
            "lost_to_budget": len(block.dropped),
            "subjects_missing": len(grown_keys - set(keys)),
            "curated_changed": changed,
            "text": block.text,
        }


# --- the scripted model ------------------------------------------------------------------------


class ScriptedConsolidator:
    """Answers a consolidation call from the fixture's labels (see the module docstring)."""

    def __init__(self, label: dict[int, dict]) -> None:
        self.label = label

    def __call__(self, body: dict) -> tuple[str, None]:
        from tests.fake_openai import shown_records

        groups: dict[str, list[dict]] = {}
        for record in shown_records(body):
            entry = self.label.get(record["id"])
            if record.get("deprecated") and not record.get("user_curated"):
                continue  # already reversed (it ignores only the user's curation)
            if entry is not None and not entry["small_talk"]:
                groups.setdefault(entry["key"], []).append(record)
        operations = []
        for group in groups.values():
            operations.extend(self._group(group))
        return json.dumps({"operations": operations}), None

    def names(self, body: dict) -> str:
        """The subject names call (memory/actions/consolidation/subjects.py): each entry
        named by its labelled key (a small-talk entry by its title: it has no subject)."""
        from tests.fake_openai import shown_records

        subjects = []
        for record in shown_records(body):
            entry = self.label.get(record["id"])
            if entry is not None:
                name = entry["title"] if entry["small_talk"] else entry["key"].replace("-", " ")
                subjects.append({"id": record["id"], "name": name.lower()})
        return json.dumps({"subjects": subjects})

    def _group(self, group: list[dict]) -> list[dict]:
        if len(group) < 2:
            return []
        newest = group[-1]
        value = self.label[newest["id"]]["value"]
        same = [r for r in group if self.label[r["id"]]["value"] == value]
        operations = [
            {"op": "supersede", "old": r["id"], "new": newest["id"]}
            for r in group
            if self.label[r["id"]]["value"] != value
        ]
        if len(same) > 1:
            others = "; ".join(r["title"] for r in same[:-1])
            summary = f"{newest.get('summary', '')} (also: {others})"
            operations.append(
                {
                    "op": "merge",
                    "ids": [r["id"] for r in same],
                    "title": newest["title"],
                    "summary": summary,
                }
            )
        return operations


# --- the run -----------------------------------------------------------------------------------


def run(args) -> dict:
    from django.conf import settings

    from memory.actions.consolidation import do_consolidate
    from memory.lib.tokens import estimate_tokens
    from memory.llm import clear_client_cache
    from memory.models import Agent, Organization
    from memory.stores.persistent import MEMORY_HEADER

    entries = load_fixture(args.fixture, args.sessions)
    reversed_ids = {old for entry in entries for old in entry.get("reverses", ())}
    organization = Organization.objects.create(name="Bench", slug="bench")
    agent = Agent.objects.create(
        organization=organization,
        name="Bench",
        soul="You are Bench.",
        memory_token_budget=args.budget,
    )
    without = Scope(agent=agent, username="without")
    with_ = Scope(agent=agent, username="with")
    offline = Scope(agent=agent, username="offline") if args.offline else None
    fake = None
    if args.real:
        settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = args.base_url, "not-needed"
        settings.LLM_TIMEOUT_SECONDS = REAL_TIMEOUT_SECONDS
        if args.model:
            settings.DRIFTLESS_MODEL = args.model
    else:
        from memory.actions.consolidation import SUBJECTS_SCHEMA_NAME
        from tests.fake_openai import FakeOpenAI

        scripted = ScriptedConsolidator(with_.label)
        fake = FakeOpenAI(responder=scripted)
        fake.routes[SUBJECTS_SCHEMA_NAME] = scripted.names
        settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = fake.base_url, "bench-key"
    settings.LLM_MAX_RETRIES = 0
    clear_client_cache()
    runs, seconds, offline_runs = [], [], []
    try:
        for number in range(1, args.sessions + 1):
            made = [entry for entry in entries if entry["session"] == number]
            without.grow(number, made)
            with_.grow(number, made)
            if offline is not None:
                offline.grow(number, made)
            if number % args.every == 0 or number == args.sessions:
                if offline is not None:
                    offline_runs.append(_offline_run(settings, agent=agent, user=offline.user))
                started = time.monotonic()
                runs.append(do_consolidate(agent=agent, user=with_.user))
                seconds.append(time.monotonic() - started)
                print(f"  consolidation after session {number}: {_run_line(runs[-1])}", flush=True)
                if args.show_blocks:  # what the model proposed, and why any was refused
                    print(f"    proposal: {json.dumps(runs[-1].proposal, ensure_ascii=False)}")
                    for item in runs[-1].refused:
                        print(f"    refused: {item['reason']}")
    finally:
        clear_client_cache()
        if fake is not None:
            fake.close()
    limit = args.budget + estimate_tokens(MEMORY_HEADER) + 1
    scopes = (without, with_, offline)
    return _result(args, entries, reversed_ids, scopes, runs, seconds, offline_runs, limit)


def _result(args, entries, reversed_ids, scopes, runs, seconds, offline_runs, limit) -> dict:
    """What the run measured, the targets it checks and the fixture it grew."""
    without, with_, offline = scopes
    result = {
        "without": without.measure(reversed_ids=reversed_ids),
        "with": with_.measure(reversed_ids=reversed_ids),
    }
    result["runs"] = {
        "count": len(runs),
        "statuses": dict(Counter(str(run.status) for run in runs)),
        "applied": sum(len(run.applied) for run in runs),
        "refused": sum(len(run.refused) for run in runs),
        "refused_curated": sum(
            "curated by the user" in item["reason"] for run in runs for item in run.refused
        ),
        "refused_unrelated": sum(
            item["reason"].startswith("unrelated") for run in runs for item in run.refused
        ),
        "mixed_merges": mixed_merges(runs, with_.label),
        "wrongly_refused": wrongly_refused(runs, with_.label),
        "model_seconds": round(sum(seconds), 1),
        "max_run_seconds": round(max(seconds, default=0.0), 1),
    }
    result["targets"] = _targets(result, limit=limit)
    if offline is not None:
        result["offline"] = offline.measure(reversed_ids=reversed_ids)
        result["offline_runs"] = {
            "count": len(offline_runs),
            "statuses": dict(Counter(str(run.status) for run in offline_runs)),
            "merged": sum(len(run.applied) for run in offline_runs),
            "superseded": sum(
                item["op"] == "supersede" for run in offline_runs for item in run.applied
            ),
            "refused": sum(len(run.refused) for run in offline_runs),
            "mixed_merges": mixed_merges(offline_runs, offline.label, proposer="rules"),
        }
        result["targets"].update(_offline_targets(result, limit=limit))
    result["fixture"] = {
        "sessions": args.sessions,
        "entries": len(entries),
        "keys": len({e["key"] for e in entries if not e["small_talk"]}),
        "reversed": len(reversed_ids),
        "small_talk": sum(e["small_talk"] for e in entries),
        "curated": sum(bool(e.get("curated")) for e in entries),
    }
    return result


def mixed_merges(runs, label: dict[int, dict], *, proposer: str = "model") -> list[dict]:
    """Each applied merge that joined entries of different labelled subjects (a small-talk
    entry is a subject of its own): the titles it joined, and who proposed it (``proposer``,
    or the model-free pass's rules beside it)."""
    return [
        {"titles": _titles(item, label), "by": item.get("by", proposer)}
        for run in runs
        for item in run.applied
        if item["op"] == "merge" and len(_subjects(item, label)) > 1
    ]


def wrongly_refused(runs, label: dict[int, dict]) -> list[dict]:
    """Each merge refused as ``unrelated`` whose entries are all of one labelled subject:
    what the one-subject checks cost (the titles, and the reason's first words)."""
    return [
        {"titles": _titles(item, label), "reason": item["reason"][:60]}
        for run in runs
        for item in run.refused
        if item.get("op") == "merge"
        and item["reason"].startswith("unrelated")
        and len(_subjects(item, label)) == 1
    ]


def _subjects(item: dict, label: dict[int, dict]) -> set:
    entries = [label[topic_id] for topic_id in item["ids"] if topic_id in label]
    return {entry["id"] if entry["small_talk"] else entry["key"] for entry in entries}


def _titles(item: dict, label: dict[int, dict]) -> list[str]:
    return [label[topic_id]["title"] for topic_id in item["ids"] if topic_id in label]


def _offline_run(settings, *, agent, user):
    """One run of the model-free pass: the same consolidation with no model configured."""
    from memory.actions.consolidation import do_consolidate

    endpoint = settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = "", ""
    try:
        return do_consolidate(agent=agent, user=user)
    finally:
        settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = endpoint


def _offline_targets(result: dict, *, limit: int) -> dict:
    off, pass_ = result["without"], result["offline"]
    return {
        "offline_fewer_duplicates": pass_["duplicates_left"] < off["duplicates_left"],
        "offline_never_supersedes": result["offline_runs"]["superseded"] == 0,
        "offline_curated_unchanged": pass_["curated_changed"] == 0,
        "offline_tokens_bounded": pass_["block_tokens"] <= limit,
        "offline_no_subject_lost": pass_["subjects_missing"] <= off["subjects_missing"],
    }


def _run_line(run) -> str:
    detail = f" ({run.detail})" if run.detail else ""
    return f"{run.status}, {len(run.applied)} applied, {len(run.refused)} refused{detail}"


def _targets(result: dict, *, limit: int) -> dict:
    off, on = result["without"], result["with"]
    return {
        "duplicates": on["duplicates_left"] <= TARGET_SHARE * off["duplicates_left"],
        "reversed": on["reversed_still_asserted"] <= TARGET_SHARE * off["reversed_still_asserted"],
        "curated_unchanged": on["curated_changed"] == 0 and off["curated_changed"] == 0,
        "tokens_bounded": on["block_tokens"] <= limit and off["block_tokens"] <= limit,
        "no_subject_lost": on["subjects_missing"] <= off["subjects_missing"],
        "merges_one_subject": not result["runs"]["mixed_merges"],
    }


COLUMNS = [
    ("entries_in_block", "entries in block"),
    ("block_tokens", "block tokens"),
    ("duplicates_left", "duplicates left"),
    ("reversed_still_asserted", "reversed still asserted"),
    ("lost_to_budget", "lost to budget"),
    ("subjects_missing", "subjects missing"),
    ("curated_changed", "curated changed"),
]


def report(result: dict, *, mode: str) -> None:
    print()
    print("| consolidation | " + " | ".join(title for _, title in COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    lanes = [lane for lane in ("without", "with", "offline") if lane in result]
    for lane in lanes:
        row = result[lane]
        print(f"| {lane} | " + " | ".join(str(row[key]) for key, _ in COLUMNS) + " |")
    runs = result["runs"]
    print(
        f"\nmodel: {mode}; {runs['count']} runs {runs['statuses']}, {runs['applied']} operations "
        f"applied, {runs['refused']} refused ({runs['refused_curated']} on curated entries, "
        f"{runs['refused_unrelated']} unrelated), "
        f"{runs['model_seconds']} s in all (longest {runs['max_run_seconds']} s)"
    )
    for merge in runs["mixed_merges"]:
        titles = " + ".join(json.dumps(title, ensure_ascii=False) for title in merge["titles"])
        print(f"merged across subjects (by {merge['by']}): {titles}")
    for refused in runs["wrongly_refused"]:
        titles = " + ".join(json.dumps(title, ensure_ascii=False) for title in refused["titles"])
        print(f"refused though one subject: {titles} ({refused['reason']}...)")
    if "offline_runs" in result:
        print(f"offline pass: {result['offline_runs']}")
    targets = result["targets"].items()
    print("targets: " + ", ".join(f"{k} {'met' if ok else 'MISSED'}" for k, ok in targets))
    summary = {lane: {k: v for k, v in result[lane].items() if k != "text"} for lane in lanes}
    print(
        json.dumps(
            {
                "bench": "consolidation",
                "mode": mode,
                **summary,
                "runs": runs,
                **({"offline_runs": result["offline_runs"]} if "offline_runs" in result else {}),
                "fixture": result["fixture"],
                "targets": result["targets"],
                "pass": all(result["targets"].values()),
            },
            ensure_ascii=False,
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.consolidation", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--every", type=int, default=10, help="consolidate every N sessions")
    parser.add_argument("--budget", type=int, default=1500, help="the memory token budget")
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--real", action="store_true", help="ask a real model endpoint")
    parser.add_argument(
        "--offline", action="store_true", help="add a user consolidated by the model-free pass"
    )
    parser.add_argument("--base-url", default="http://127.0.0.1:8081/v1")
    parser.add_argument("--model", default="", help="the model name to ask for (--real)")
    parser.add_argument(
        "--show-blocks", action="store_true", help="print both blocks and the proposals"
    )
    args = parser.parse_args()
    var_dir = configure()
    logging.getLogger("memory.actions.consolidation").setLevel(logging.WARNING)
    try:
        result = run(args)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    if args.show_blocks:
        for lane in [lane for lane in ("without", "with", "offline") if lane in result]:
            print(f"\n--- block {lane} consolidation ---\n{result[lane]['text']}")
    report(result, mode=f"real ({args.base_url})" if args.real else "scripted")
    return 0 if all(result["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
