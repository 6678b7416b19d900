"""Summary-cost benchmark: what refreshing a long topic sends to the summary model.

Usage (from the repository root)::

    python -m bench.summary_cost [--messages 200 2000] [--every 10]

A topic grows to each size with realistic messages (user and assistant turns of one to
three sentences, a tool round every ten messages with a 3,000-character result) and is
refreshed every ``--every`` messages, as the heartbeat does, through the real summarizer
and the real ``openai`` client against the fake OpenAI-compatible server of the test
suite. Two policies run side by side in the same process:

* ``full``: the whole history whenever it fits ``SUMMARY_INPUT_TOKEN_BUDGET``
  (``SUMMARY_INCREMENTAL=false``);
* ``incremental``: the previous summary plus the messages since (the default).

It prints, per size and policy, the number of summary calls, the tokens they sent in all
(approximate, four characters a token), the largest call, and the budget; then a last
JSON line::

    {"bench": "summary_cost", "rows": [{"messages": N, "policy": P, "calls": C,
     "tokens": T, "max_call_tokens": M, "budget": B}, ...]}

It runs on a throwaway SQLite database and the in-process cache (no service needed).
"""

from __future__ import annotations

import argparse
import json
import shutil

from bench.common import embedded_django

SENTENCES = [
    "We compared the storage options for the billing ledger again.",
    "Postgres keeps strong consistency and the team already runs it.",
    "The replication lag on the read replicas stayed under a second.",
    "Let's keep invoices immutable and write corrections as new rows.",
    "Retention is seven years for the audit trail, per the accountants.",
    "Nightly exports go to object storage, encrypted at rest.",
]


def configure() -> str:
    return embedded_django("bench-summary-")


def grow(session, count: int, start: int) -> None:
    """``count`` more messages at the end of the session's active topic."""
    from memory.models import Message

    for i in range(start, start + count):
        if i % 10 == 8:
            call = {"id": f"c{i}", "type": "function", "function": {"name": "search"}}
            call["function"]["arguments"] = json.dumps({"query": "ledger retention"})
            session.append_message(role=Message.Role.ASSISTANT, tool_calls=[call])
        elif i % 10 == 9:
            rows = [{"id": n, "text": SENTENCES[n % len(SENTENCES)]} for n in range(45)]
            session.append_message(
                role=Message.Role.TOOL,
                content=json.dumps(rows)[:3000],
                tool_call_id=f"c{i - 1}",
                tool_name="search",
            )
        else:
            role = Message.Role.USER if i % 2 == 0 else Message.Role.ASSISTANT
            text = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(1 + i % 3))
            session.append_message(role=role, content=f"({i}) {text}")


def run(*, size: int, every: int, incremental: bool, fake) -> dict:
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from memory.actions.summarize import do_summarize_topic, request_tokens
    from memory.models import Agent, Organization, Session

    settings.SUMMARY_INCREMENTAL = incremental
    label = f"{size}-{'inc' if incremental else 'full'}"
    organization = Organization.objects.create(name=label, slug=label)
    user = get_user_model().objects.create_user(username=label)
    agent = Agent.objects.create(organization=organization, name="Bench", soul="You are Bench.")
    session = Session.objects.start(user=user, agent=agent)
    first = len(fake.requests)
    for start in range(0, size, every):
        grow(session, min(every, size - start), start)
        fake.reply_json(
            {
                "title": "Billing ledger",
                "summary": "Ledger: Postgres, " + "x" * 400,
                "include_in_memory": True,
            }
        )
        do_summarize_topic(topic_id=session.active_topic().pk)
    calls = [request_tokens(r["messages"]) for r in fake.requests[first:]]
    return {
        "messages": size,
        "policy": "incremental" if incremental else "full",
        "calls": len(calls),
        "tokens": sum(calls),
        "max_call_tokens": max(calls),
        "budget": settings.SUMMARY_INPUT_TOKEN_BUDGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--every", type=int, default=10)
    args = parser.parse_args()
    var_dir = configure()
    from django.conf import settings

    from memory.llm import clear_client_cache
    from tests.fake_openai import FakeOpenAI

    fake = FakeOpenAI()
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = fake.base_url, "bench-key"
    settings.LLM_MAX_RETRIES = 0
    clear_client_cache()
    rows = []
    try:
        for size in args.messages:
            for incremental in (False, True):
                rows.append(run(size=size, every=args.every, incremental=incremental, fake=fake))
    finally:
        clear_client_cache()
        fake.close()
        shutil.rmtree(var_dir, ignore_errors=True)
    print(
        f"{'messages':>8} {'policy':>12} {'calls':>6} {'tokens':>10} {'max call':>9} {'budget':>7}"
    )
    for row in rows:
        print(
            f"{row['messages']:>8} {row['policy']:>12} {row['calls']:>6} {row['tokens']:>10,}"
            f" {row['max_call_tokens']:>9,} {row['budget']:>7,}"
        )
    print(json.dumps({"bench": "summary_cost", "rows": rows}))


if __name__ == "__main__":
    main()
