"""Prompt-cache benchmark: what a long conversation costs with the product's window and
with a strict sliding window, side by side in one run.

Usage (from the repository root)::

    python -m bench.prompt_cache [--turns 222] [--blocks 1,10]

A long multi-subject conversation (six single-subject dialogues of ``bench/data/``, each
replayed for ``turns / 6`` user turns, replies of 60–150 words) goes through the real turn
path (``memory.actions.turn.do_send_message``: context assembly, the model call, storing) and the
real evaluation pipeline (the ten-message heartbeat: lexical drift detection, silent
forks, summaries; run right after the turn that triggered it instead of on a timer
thread, so the run is deterministic), against a fake OpenAI-compatible provider in this
process (tests/fake_openai.py) that caches prompts as providers do: the longest prefix
of a request already seen in an earlier request with the same ``prompt_cache_key``,
counted from 1,024 tokens in 128-token steps. Tokens are estimated as the product does
(four characters a token) over the request as the provider would read it: the tools,
then every message with its role.

The scope has 10 promoted topics (about 100 tokens of summary each) and 8 durable facts,
so the stable prefix alone passes the provider's 1,024-token minimum. Each window policy
(``--blocks``: 1 is the strict sliding window of 20 messages; 16, the product's, trims
sixteen messages at once) replays the same conversation in its own scope, so their caches
never mix.

It prints, per policy, the chat calls' prompt tokens, cached tokens and cached share, the
upper limit (1 − new tokens / prompt tokens, where a request's new tokens are those past
its longest common prefix with the previous chat request of its cache key: the share a
perfect prefix cache, with no minimum and no 128-token steps, could serve), the summary
calls and their prompt tokens, the largest chat prompt through turn 50 and through the
last turn, and the prompts of turns 50 and 200. A last replay with the product's window
re-sends the whole history in every summary (``SUMMARY_INCREMENTAL=false``: how summaries
worked before they became incremental), the summaries' same-run baseline. Then a last
JSON line for the product's policy next to the strict one::

    {"bench": "prompt_cache", "share": …, "strict_share": …, "summary_tokens": …,
     "max_prompt_tokens": …, ...}

Storage is a throwaway SQLite file with the in-process cache (the token figures do not
depend on the database); nothing outside a temporary directory is touched.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import setup_django

ROOT = Path(__file__).resolve().parent.parent

DATA = [
    ROOT / "bench" / "data" / "product-tune.jsonl",
    ROOT / "bench" / "data" / "product-test.jsonl",
]
# Single-subject dialogues (no boundaries), in the order they are replayed.
SUBJECTS = (
    "product-tune-01",  # sourdough
    "product-test-09",  # Docker and Postgres
    "product-tune-05",  # knee pain on runs
    "product-test-04",  # student loans
    "product-tune-16",  # bathroom renovation
    "product-test-12",  # first guitar
)
CHARS_PER_TOKEN = 4
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
REPLY_MIN_WORDS, REPLY_MAX_WORDS = 60, 150


# --- the provider's prompt cache ---------------------------------------------------------


def provider_text(body: dict) -> str:
    """The request as a provider reads it, tools first: deterministic, so equal prefixes
    of two requests are equal prefixes of their texts."""
    parts = [json.dumps(body.get("tools") or [], sort_keys=True, ensure_ascii=False)]
    for message in body.get("messages", []):
        parts.append(f"<|{message.get('role')}|>")
        if message.get("content"):
            parts.append(str(message["content"]))
        if message.get("tool_calls"):
            parts.append(json.dumps(message["tool_calls"], sort_keys=True, ensure_ascii=False))
        if message.get("tool_call_id"):
            parts.append(str(message["tool_call_id"]))
    return "\n".join(parts)


class PrefixCache:
    """Per ``prompt_cache_key``, the prefix hashes of every request seen, at each 128-token
    boundary; a request is served from cache up to its longest boundary already seen (at
    least 1,024 tokens), as providers' automatic prompt caching does."""

    def __init__(self) -> None:
        self._seen: dict[str, set[bytes]] = {}

    def usage(self, body: dict, *, completion_text: str) -> tuple[int, int]:
        text = provider_text(body)
        step = CACHE_STEP_TOKENS * CHARS_PER_TOKEN
        seen = self._seen.setdefault(str(body.get("prompt_cache_key")), set())
        digest = hashlib.sha1()
        cached_chars = 0
        boundaries = []
        for start in range(0, len(text) - step + 1, step):
            digest.update(text[start : start + step].encode("utf-8"))
            key = digest.copy().digest()
            boundaries.append(key)
            end = start + step
            if key in seen and end >= CACHE_MIN_TOKENS * CHARS_PER_TOKEN:
                cached_chars = end
        seen.update(boundaries)
        prompt_tokens = -(-len(text) // CHARS_PER_TOKEN)
        return prompt_tokens, cached_chars // CHARS_PER_TOKEN


@dataclass
class Call:
    kind: str  # "chat" or "summary"
    turn: int
    prompt_tokens: int
    cached_tokens: int
    new_tokens: int  # past its common prefix with the previous request of its cache key


@dataclass
class Provider:
    """The fake model's behaviour: scripted replies for chat calls, a JSON summary for
    summary calls, usage from the prefix cache. ``turn`` is set by the replay."""

    replies: dict[str, str]
    cache: PrefixCache = field(default_factory=PrefixCache)
    calls: list[Call] = field(default_factory=list)
    turn: int = 0
    _previous: dict[str, str] = field(default_factory=dict)

    def __call__(self, body: dict) -> tuple[str, object]:
        from memory.llm import Usage

        if body.get("response_format"):
            content = json.dumps(summary_answer(body))
            kind = "summary"
        else:
            last_user = next(
                (m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), ""
            )
            content = self.replies.get(last_user, "I see. Tell me more.")
            kind = "chat"
        prompt, cached = self.cache.usage(body, completion_text=content)
        self.calls.append(Call(kind, self.turn, prompt, cached, self._new_tokens(kind, body)))
        completion = -(-len(content) // CHARS_PER_TOKEN)
        return content, Usage(
            prompt_tokens=prompt, cached_tokens=cached, completion_tokens=completion
        )

    def _new_tokens(self, kind: str, body: dict) -> int:
        """Tokens of the request past its longest common prefix with the previous request
        of the same kind and ``prompt_cache_key`` (no minimum, no 128-token steps): what a
        perfect prefix cache would still read afresh (for the limit 1 − new / prompt)."""
        key = f"{kind}:{body.get('prompt_cache_key')}"
        text = provider_text(body)
        shared = common_prefix_length(self._previous.get(key, ""), text)
        self._previous[key] = text
        return -(-(len(text) - shared) // CHARS_PER_TOKEN)


def common_prefix_length(first: str, second: str) -> int:
    """How many leading characters two strings share (a bisection over slices)."""
    low, high = 0, min(len(first), len(second))
    while low < high:
        middle = (low + high + 1) // 2
        if first[:middle] == second[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def summary_answer(body: dict) -> dict:
    """A summary as a model would write it: a title from the first user line, about 80
    words of summary drawn from the transcript, not promoted."""
    transcript = body["messages"][-1]["content"]
    first = re.search(r"^User: (.+)$", transcript, flags=re.MULTILINE)
    words = (first.group(1) if first else "Conversation").split()
    title = " ".join(words[:6]).rstrip(".,?!")
    said = re.findall(r"^Assistant: (.+)$", transcript, flags=re.MULTILINE)
    summary_words = " ".join(said[:3]).split()[:80]
    return {"title": title, "summary": " ".join(summary_words), "include_in_memory": False}


# --- the conversation --------------------------------------------------------------------


def load_dialogues() -> dict[str, list[dict]]:
    dialogues = {}
    for path in DATA:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                dialogues[record["id"]] = record["turns"]
    return dialogues


def conversation(turns: int) -> tuple[list[tuple[int, str]], dict[str, str]]:
    """(subject index, user message) for every turn, and the reply to each message: the
    dialogue's own answer, lengthened with the answers after it to 60–150 words."""
    dialogues = load_dialogues()
    per_subject = -(-turns // len(SUBJECTS))
    script: list[tuple[int, str]] = []
    replies: dict[str, str] = {}
    for index, name in enumerate(SUBJECTS):
        rows = dialogues[name]
        pairs = [
            (rows[i]["text"], rows[i + 1]["text"])
            for i in range(0, len(rows) - 1, 2)
            if rows[i]["role"] == "user"
        ]
        answers = [answer for _, answer in pairs]
        for number in range(per_subject):
            question, _ = pairs[number % len(pairs)]
            rounds = number // len(pairs)
            text = (
                question if rounds == 0 else f"{question} (coming back to this, take {rounds + 1})"
            )
            if number == 0 and index:
                text = f"Different question: {text}"
            reply_words: list[str] = []
            offset = number % len(pairs)
            while len(reply_words) < REPLY_MIN_WORDS:
                reply_words += answers[offset % len(answers)].split()
                offset += 1
            replies[text] = " ".join(reply_words[:REPLY_MAX_WORDS])
            script.append((index, text))
    return script[:turns], replies


# --- the run -----------------------------------------------------------------------------


def configure(workdir: str) -> None:
    for name in ("DATABASE_URL", "REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "driftless.settings",
            "DRIFTLESS_VAR_DIR": workdir,
            "SECRET_KEY": "bench-only-secret-key",
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "LLM_MAX_RETRIES": "0",
            "DRIFT_DETECTOR": "lexical",
            "OPENAI_API_KEY": "bench-key",
        }
    )


def build_scope(*, name: str):
    """A user with 10 promoted topics (in an earlier session) and 8 facts, and a new
    session to replay the conversation in."""
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from memory.models import Agent, Organization, Session, Topic
    from memory.stores.facts import set_fact

    organization, _ = Organization.objects.get_or_create(name="Bench", slug="bench")
    agent, _ = Agent.objects.get_or_create(
        organization=organization,
        name="Bench",
        defaults={
            "soul": (
                "You are Sage, a careful and friendly assistant for everyday questions: "
                "cooking, health, money, home repair, software and hobbies. You answer in "
                "short paragraphs, give concrete numbers and steps, say plainly when "
                "something needs a professional, and never invent facts about the user. "
                "When the user returns to an earlier subject, you build on what was decided "
                "then instead of starting over."
            ),
            "skills": "Explaining step by step. Planning. Debugging. Budgeting.",
        },
    )
    user = get_user_model().objects.create_user(name, password=None)
    organization.members.add(user)
    earlier = Session.objects.start(user=user, agent=agent)
    now = timezone.now()
    for number in range(10):
        Topic.objects.create(
            session=earlier,
            title=f"Earlier decision {number}",
            summary=(
                f"Decision {number}: the user prefers option {number} for the household "
                "plan, with a monthly budget review on the first Sunday, receipts kept in "
                "the shared folder, and the car serviced every spring before the long "
                "drive north. Keep suggestions consistent with these choices and mention "
                "the trade-offs when a new idea would change them."
            ),
            keep_in_memory=True,
            memory_changed_at=now - timedelta(days=30 - number),
            is_active=False,
        )
    facts = {
        "name": "Robin",
        "city": "Utrecht",
        "diet": "vegetarian, no mushrooms",
        "work": "backend developer, Python and PostgreSQL",
        "household": "partner and a nine-year-old",
        "budget": "saves 15 % of net income",
        "running": "10 km three times a week",
        "languages": "Dutch, English, learning Spanish",
    }
    for key, value in facts.items():
        set_fact(user=user, agent=agent, key=key, value=value, actor="user")
    return Session.objects.start(user=user, agent=agent)


def replay(*, block: int, script, provider: Provider, name: str, incremental: bool = True) -> dict:
    """One policy: the whole conversation through the turn path and the heartbeat."""
    from django.conf import settings

    import memory.actions.context
    import memory.actions.scheduling
    from memory.actions.evaluation import run_evaluation
    from memory.actions.turn import do_send_message
    from memory.models import Topic

    pending: list[tuple[int, str]] = []
    memory.actions.scheduling.set_background_starter(
        lambda *, session_id, reason, **_: pending.append((session_id, reason))
    )
    memory.actions.context.ACTIVE_WINDOW_BLOCK = block
    settings.SUMMARY_INCREMENTAL = incremental
    session = build_scope(name=name)
    first_call = len(provider.calls)
    outcomes: list[str] = []
    for turn, (_, text) in enumerate(script, start=1):
        provider.turn = turn
        result = do_send_message(session=session, content=text)
        if result.failure:
            raise RuntimeError(f"turn {turn} failed: {result.error and result.error.content}")
        while pending:
            session_id, reason = pending.pop(0)
            outcomes.append(run_evaluation(session_id=session_id, reason=reason).action)
    calls = provider.calls[first_call:]
    chat = [call for call in calls if call.kind == "chat"]
    summaries = [call for call in calls if call.kind == "summary"]
    prompt = sum(call.prompt_tokens for call in chat)
    cached = sum(call.cached_tokens for call in chat)
    new = sum(call.new_tokens for call in chat)

    def largest_at(turn: int) -> int:
        return max((call.prompt_tokens for call in chat if call.turn == turn), default=0)

    return {
        "block": block,
        "incremental": incremental,
        "turns": len(script),
        "chat_calls": len(chat),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "share": cached / prompt,
        "limit": 1 - new / prompt,
        "summary_calls": len(summaries),
        "summary_tokens": sum(call.prompt_tokens for call in summaries),
        "largest_summary": max((call.prompt_tokens for call in summaries), default=0),
        "max_prompt_50": max(call.prompt_tokens for call in chat if call.turn <= 50),
        "max_prompt_tokens": max(call.prompt_tokens for call in chat),
        "prompt_at_50": largest_at(50),
        "prompt_at_200": largest_at(200),
        "forks": outcomes.count("forked"),
        "topics": Topic.objects.filter(session=session).count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=222, help="user turns (at least 200)")
    parser.add_argument(
        "--blocks", default="1,16", help="window blocks to compare; 1 is the strict window"
    )
    args = parser.parse_args()
    blocks = [int(part) for part in args.blocks.split(",") if part.strip()]
    if args.turns < 12 or not blocks or not all(1 <= block <= 20 for block in blocks):
        parser.error("turns must be at least 12 and blocks 1..20")

    workdir = tempfile.mkdtemp(prefix="bench-prompt-cache-")
    configure(workdir)
    started = time.perf_counter()
    fake = None
    try:
        setup_django()
        from django.conf import settings
        from django.core.management import call_command

        from memory.lib.spec import ACTIVE_WINDOW_BLOCK
        from memory.llm import clear_client_cache
        from tests.fake_openai import FakeOpenAI

        call_command("migrate", verbosity=0)
        script, replies = conversation(args.turns)
        provider = Provider(replies=replies)
        fake = FakeOpenAI(responder=provider)
        settings.OPENAI_BASE_URL = fake.base_url
        clear_client_cache()
        results = [
            replay(block=block, script=script, provider=provider, name=f"bench{block}")
            for block in blocks
        ]
        # Today's summaries, for the same conversation: the whole history every refresh.
        whole = replay(
            block=ACTIVE_WINDOW_BLOCK,
            script=script,
            provider=provider,
            name="bench-whole-history",
            incremental=False,
        )
    finally:
        if fake is not None:
            fake.close()
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.perf_counter() - started
    return print_report(args, replies, results, whole, ACTIVE_WINDOW_BLOCK, seconds)


def print_report(args, replies: dict, results: list[dict], whole: dict, block: int, seconds):
    """The table and the last JSON line; ``block`` is the product's window block."""
    words = [len(reply.split()) for reply in replies.values()]
    print(
        f"prompt cache: {args.turns} turns over {len(SUBJECTS)} subjects, replies of "
        f"{min(words)}–{max(words)} words (mean {sum(words) / len(words):.0f}); cache from "
        f"{CACHE_MIN_TOKENS} tokens in {CACHE_STEP_TOKENS}-token steps; {seconds:.0f} s"
    )
    header = (
        "window",
        "prompt tok",
        "cached tok",
        "share",
        "limit",
        "summaries",
        "summary tok",
        "max sum. tok",
        "max@50",
        "max@end",
        "turn 50",
        "turn 200",
        "forks",
    )
    print("  ".join(f"{h:>12}" for h in header))
    for row in [*results, whole]:
        label = "strict 20" if row["block"] == 1 else f"20 - {row['block']}"
        if not row["incremental"]:
            label += " (a)"
        cells = (
            label,
            row["prompt_tokens"],
            row["cached_tokens"],
            f"{100 * row['share']:.1f} %",
            f"{100 * row['limit']:.1f} %",
            row["summary_calls"],
            row["summary_tokens"],
            row["largest_summary"],
            row["max_prompt_50"],
            row["max_prompt_tokens"],
            row["prompt_at_50"],
            row["prompt_at_200"],
            row["forks"],
        )
        print("  ".join(f"{c:>12}" for c in cells))
    print(
        "window: 'strict 20' slides one message a turn; '20 - B' holds 21-B to 20 messages "
        "and drops the oldest B at once. share and limit count chat calls; summaries are "
        "the heartbeat's and the forks' summary calls. (a): summaries re-sending the whole "
        "history every refresh (SUMMARY_INCREMENTAL=false), the summaries' baseline."
    )
    product = next((row for row in results if row["block"] == block), results[-1])
    strict = next((row for row in results if row["block"] == 1), None)
    print(
        json.dumps(
            {
                "bench": "prompt_cache",
                "turns": args.turns,
                "block": product["block"],
                "share": round(product["share"], 4),
                "strict_share": round(strict["share"], 4) if strict else None,
                "limit": round(product["limit"], 4),
                "prompt_tokens": product["prompt_tokens"],
                "cached_tokens": product["cached_tokens"],
                "summary_tokens": product["summary_tokens"],
                "summary_calls": product["summary_calls"],
                "whole_history_summary_tokens": whole["summary_tokens"],
                "summary_ratio": round(product["summary_tokens"] / whole["summary_tokens"], 3),
                "max_prompt_tokens": product["max_prompt_tokens"],
                "max_prompt_tokens_through_50": product["max_prompt_50"],
                "prompt_tokens_at_50": product["prompt_at_50"],
                "prompt_tokens_at_200": product["prompt_at_200"],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
