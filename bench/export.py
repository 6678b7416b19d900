"""Export memory benchmark: the extra resident memory of exporting one long session.

Usage (from the repository root)::

    python -m bench.export [--messages 200000]

It builds, in a PostgreSQL database of its own (dropped at the end), one scope whose one
session holds ``--messages`` messages of about 200 characters (inserted in SQL), then
exports it whole as the page and the API do (memory/actions/export_text.py: pieces of
JSON text written as they are read) and measures the process's peak resident memory above
what it held before (Linux: VmHWM, reset through /proc/self/clear_refs). As a baseline in
the same run, after it, the whole document built at once (export_memory then json.dumps,
what the page did before). It prints a table and a last JSON line::

    {"bench": "export", "messages": N, "streamed_mib": S, "whole_mib": W, "target_mib": 100}

and exits 1 when the streamed export takes 100 MiB or more.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.common import reachable
from bench.search import configure, drop_database

TARGET_MIB = 100.0


def _status(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB to MiB
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_above(run) -> float:
    """MiB of resident memory the call of ``run`` added at its peak."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak (VmHWM) starts again from the current size
    before = _status("VmRSS")
    run()
    return _status("VmHWM") - before


def build(messages: int):
    from django.contrib.auth import get_user_model
    from django.db import connection

    from memory.models import Agent, Organization, Session

    organization = Organization.objects.create(name="Bench", slug="bench")
    agent = Agent.objects.create(organization=organization, name="Bench")
    user = get_user_model().objects.create_user(username="exporter")
    organization.members.add(user)
    session = Session.objects.start(user=user, agent=agent, title="One long session")
    topic = session.active_topic()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_message (session_id, topic_id, seq, role, content, tool_calls,"
            " tool_call_id, tool_name, model_name, stopped, memory_trace, versions, created_at)"
            " SELECT %s, %s, n, CASE WHEN n %% 2 = 1 THEN 'user' ELSE 'assistant' END,"
            " 'message ' || n || ': ' || repeat('the plan for the week, ', 8), '[]'::jsonb,"
            " '', '', '', false, '{}'::jsonb, '[]'::jsonb, now() FROM generate_series(1, %s) AS n",
            [session.pk, topic.pk, messages],
        )
    Session.objects.filter(pk=session.pk).update(message_count=messages)
    return user, agent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    args = parser.parse_args()
    if not reachable(5432):
        print("python -m bench.export needs PostgreSQL on 127.0.0.1:5432", file=sys.stderr)
        return 2
    name = configure()
    try:
        from django.core.management import call_command

        from memory.actions.export_text import export_text
        from memory.actions.portability import export_memory

        call_command("migrate", verbosity=0)
        user, agent = build(args.messages)
        written = [0]

        def streamed() -> None:
            for piece in export_text(user=user, agent=agent, include_sessions=True):
                written[0] += len(piece)

        def whole() -> None:
            document = export_memory(user=user, agent=agent, include_sessions=True)
            json.dumps(document, ensure_ascii=False, indent=1)

        started = time.perf_counter()
        streamed_mib = peak_above(streamed)
        streamed_s = time.perf_counter() - started
        started = time.perf_counter()
        whole_mib = peak_above(whole)
        whole_s = time.perf_counter() - started
    finally:
        drop_database(name)
    size = written[0] / 2**20
    print(f"export of one session of {args.messages:,} messages ({size:.0f} MiB of JSON)")
    print(f"{'path':<28} {'extra MiB':>10} {'seconds':>8}")
    print(f"{'streamed (export_text)':<28} {streamed_mib:>10.1f} {streamed_s:>8.1f}")
    print(f"{'baseline: whole document':<28} {whole_mib:>10.1f} {whole_s:>8.1f}")
    print(
        json.dumps(
            {
                "bench": "export",
                "messages": args.messages,
                "streamed_mib": round(streamed_mib, 1),
                "whole_mib": round(whole_mib, 1),
                "target_mib": TARGET_MIB,
            }
        )
    )
    return 0 if streamed_mib < TARGET_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
