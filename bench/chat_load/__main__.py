"""Chat load benchmark: websocket clients against real server processes, CPU per turn.

Usage (from the repository root)::

    python -m bench.chat_load [--embedded] [--clients 10] [--load-clients 100]
                              [--messages 4] [--repeats 3] [--rows cpu,load]
                              [--unembedded-history]

It starts everything it needs and stops it again: a zero-latency fake OpenAI-compatible
model in this process (tests/fake_openai.py, answering every request at once, word by
word), and the project's ASGI application as ``make serve`` runs it
(driftless/multiserve.py: uvicorn processes sharing the port) in a subprocess on a free
loopback port, pointed at the fake model through
``OPENAI_BASE_URL``. The servers run the production settings, except that evaluations
(every tenth message, two seconds after a disconnect) run on the server's own timer
threads as in the embedded mode, since no Celery worker is started, and drift detection
is the model-free lexical one. Storage is a dedicated PostgreSQL database and Redis
(database 15, under a key prefix of its own) for the cache and the channel layer when both
answer on 127.0.0.1, else (or with ``--embedded``, one process only) a throwaway SQLite
file with the in-process cache and channel layer. Everything is dropped at the end.

Three servers, started one after another in every repeat (interleaved, so the shared
machine's noise falls on all of them alike):

* ``1 proc, per token``: one process on the old path, the baseline of this run: one
  ``reply.delta`` event per streamed token (``STREAM_BATCH_SECONDS=0``), through
  channels-redis's own layer (events read one at a time, and sent through the event loop:
  driftless/channel_layer.py says why the project's layer does neither);
* ``1 proc, batched``: one process, deltas coalesced (the default, 100 ms);
* ``2 procs, batched``: two worker processes behind the one port.

On the one-process servers, rows of ``--clients`` clients with short replies (8 words)
and with long ones (60–150 words) measure CPU per turn (the server's processes, all
threads, over the row); on the batched ones, a row of ``--load-clients`` clients with long
replies measures turns per second, one process against two.
Each client is its own user, made for its row (rows compare: no user brings the history of
an earlier row), in a new session; the CPU rows are short replies and long ones for new
users, and long ones for returning users (60 earlier messages that recall finds, with the
sentence vectors their evaluations stored; ``--unembedded-history``: without them, so
recall embeds them again in the turns, as for a history no evaluation saw). Each row
also reports the SQL statements and Redis commands the servers sent per turn (counted in
the server processes: bench/counting.py). All clients start at once and send ``--messages``
messages one after another, each after the previous ``turn.done``. The bench reports
the medians over the repeats, the ratios to the baseline, and how much CPU the bench
itself (clients and fake model, on the same cores) used, as a table and a last JSON line::

    {"bench": "chat_load", "cpu_ms_per_turn": {...}, "long_ratio": X, "short_ratio": Y,
     "turns_per_s": {"1": A, "2": B}, "scale_2_vs_1": B / A, "rows": [...]}

Every wait is bounded; a row that cannot finish in ``--row-timeout`` seconds, or whose
turn fails (an event that never comes), is named and the run goes on, then exits 1. It
exits 1 too when a target of issue 43 is missed: a returning user's long-reply turn at most
30 ms of CPU, 15 SQL statements and 15 Redis commands; two processes at least 1.5x one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.chat_load.environment import ROOT, configure, tear_down
from bench.chat_load.population import Client, Population, long_reply
from bench.chat_load.targets import missed_targets
from bench.common import setup_django
from bench.counting import process_totals

RECEIVE_TIMEOUT = 60.0  # one event; a turn against a zero-latency model takes far less
SERVER_START_TIMEOUT = 240.0  # a loaded shared machine starts slowly
SETTLE_SECONDS = 1.5  # after the exit-evaluation debounce, before the next row starts
COUNTS_FLUSH_SECONDS = 0.6  # the servers write their SQL and Redis counts every 0.25 s
RETURNING_HISTORY = 60  # earlier messages of a returning user (recall finds them)
SHORT_REPLY = "Hello from the zero-latency fake model, streamed word by word."
OLD_PATH = {"STREAM_BATCH_SECONDS": "0", "BENCH_CHANNELS_REDIS_LAYER": "1"}
BATCHED = {"STREAM_BATCH_SECONDS": "0.1"}
SERVERS = (  # label, worker processes, environment, rows: CPU and/or load
    ("1 proc, per token", 1, OLD_PATH, ("cpu",)),
    ("1 proc, batched", 1, BATCHED, ("cpu", "load")),
    ("2 procs, batched", 2, BATCHED, ("load",)),
)


def respond(body: dict) -> tuple[str, None]:
    """The fake model: a JSON summary for summary calls; else a long or a short reply, as
    the client's message asks."""
    if body.get("response_format"):
        answer = {"title": "Load", "summary": "A load test.", "include_in_memory": False}
        return json.dumps(answer), None
    last = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
    match = re.match(r"long (\d+):", last)
    return (long_reply(int(match.group(1))) if match else SHORT_REPLY), None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """driftless.multiserve in a subprocess (its own process group), serving the
    project's ASGI application on loopback with ``workers`` processes."""

    def __init__(self, *, env: dict[str, str], workdir: str, workers: int, label: str) -> None:
        self.label = label
        self.workers = workers
        self.port = _free_port()
        self.log_path = Path(workdir, f"uvicorn-{self.port}.log")
        self.counts_dir = Path(workdir, f"counts-{self.port}")
        self.counts_dir.mkdir()
        env = {**env, "BENCH_COUNTS_DIR": str(self.counts_dir)}
        self._log = self.log_path.open("wb")
        command = [
            sys.executable,
            "-m",
            "driftless.multiserve",  # what make serve runs
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(workers),
            "--no-access-log",
            "--log-level",
            "warning",
        ]
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_until_ready(self) -> None:
        """Listening, and answering several times per process (they start one by one)."""
        import urllib.request

        deadline = time.monotonic() + SERVER_START_TIMEOUT
        answered = 0
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {self.process.returncode}:\n{self.log()}")
            try:
                urllib.request.urlopen(f"{self.origin}/login/", timeout=5).read()
                answered += 1
                if answered >= 4 * self.workers:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"uvicorn was not ready in {SERVER_START_TIMEOUT:g} s:\n{self.log()}")

    def cpu_seconds(self) -> float:
        """CPU time used so far by every process of the server's group, all threads."""
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.process.pid:
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def log(self, limit: int = 4000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-limit:]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=10)
        self._log.close()


# --- the clients ---------------------------------------------------------------------------


class TurnFailed(Exception):
    pass


async def connect(server: Server, client: Client):
    from websockets.asyncio.client import connect as ws_connect

    return await ws_connect(
        f"ws://127.0.0.1:{server.port}/ws/sessions/{client.session_id}/",
        origin=server.origin,
        additional_headers={"Cookie": client.cookie},
        proxy=None,  # loopback only, whatever the environment says
        compression=None,
        open_timeout=RECEIVE_TIMEOUT,
        ping_interval=None,
        max_size=2**20,
    )


async def converse(socket, *, messages: int, tag: str, reply: str) -> list[float]:
    """Send ``messages`` messages one after another; the latency of each to its first
    reply delta, in seconds."""
    latencies = []
    for number in range(messages):
        prefix = f"long {number}:" if reply == "long" else "short:"
        content = f"{prefix} message {number + 1} from {tag}: how is the load today?"
        sent = time.perf_counter()
        await socket.send(json.dumps({"type": "message.send", "content": content}))
        first_delta = None
        seen: list[str] = []
        while True:
            try:
                event = json.loads(await asyncio.wait_for(socket.recv(), RECEIVE_TIMEOUT))
            except TimeoutError:
                raise TurnFailed(
                    f"{tag}, message {number + 1}: no event for {RECEIVE_TIMEOUT:g} s "
                    f"after {seen[-5:] or 'nothing'}"
                ) from None
            kind = event.get("type")
            seen.append(kind)
            if kind == "reply.delta" and first_delta is None:
                first_delta = time.perf_counter() - sent
            elif kind in ("error", "turn.error"):
                raise TurnFailed(f"{tag}: {event}")
            elif kind == "turn.done":
                if not event.get("ok") or first_delta is None:
                    raise TurnFailed(f"{tag}: the turn ended without a streamed reply: {event}")
                break
        latencies.append(first_delta)
    return latencies


async def run_row(
    server: Server, clients: list[Client], *, messages: int, reply: str, users: str
) -> dict:
    sockets = await asyncio.gather(*(connect(server, client) for client in clients))
    try:
        await asyncio.sleep(COUNTS_FLUSH_SECONDS)
        sent = process_totals(str(server.counts_dir))
        server_cpu, own_cpu = server.cpu_seconds(), time.process_time()
        machine_cpu = machine_cpu_seconds()
        started = time.perf_counter()
        results = await asyncio.gather(
            *(
                converse(socket, messages=messages, tag=f"session {client.session_id}", reply=reply)
                for socket, client in zip(sockets, clients, strict=True)
            )
        )
        elapsed = time.perf_counter() - started
        own_cpu = time.process_time() - own_cpu
        server_cpu = server.cpu_seconds() - server_cpu
        machine_cpu = machine_cpu_seconds() - machine_cpu
        await asyncio.sleep(COUNTS_FLUSH_SECONDS)
        now = process_totals(str(server.counts_dir))
    finally:
        await asyncio.gather(*(socket.close() for socket in sockets), return_exceptions=True)
    latencies = sorted(latency for result in results for latency in result)
    return {
        "server": server.label,
        "processes": server.workers,
        "clients": len(clients),
        "reply": reply,
        "users": users,
        "turns": len(latencies),
        "seconds": elapsed,
        "turns_per_s": len(latencies) / elapsed,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * _percentile(latencies, 95),
        # 100 % is one core busy: the most one Python process gets (the GIL).
        "server_cpu_pct": 100 * server_cpu / elapsed,
        "cpu_ms_per_turn": 1000 * server_cpu / len(latencies),
        "sql_per_turn": (now["sql"] - sent["sql"]) / len(latencies),
        "redis_per_turn": (now["redis"] - sent["redis"]) / len(latencies),
        "bench_cpu_pct": 100 * own_cpu / elapsed,
        # The rest of the machine: PostgreSQL, Redis, the kernel, anything else running.
        "other_cpu_pct": 100 * (machine_cpu - server_cpu - own_cpu) / elapsed,
    }


def machine_cpu_seconds() -> float:
    """CPU time the whole machine has spent busy (every core, every process), from
    /proc/stat: what the server, this bench, PostgreSQL, Redis and the kernel used."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _percentile(ordered: list[float], percent: float) -> float:
    """The nearest-rank percentile of sorted values (an actual observed latency)."""
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


async def measure_server(
    server: Server,
    population: Population,
    plan: list[tuple],
    *,
    timeout: float,
    failures: list[str],
) -> list[dict]:
    """The rows of ``plan`` on ``server``; a row whose turns fail (an event that never came,
    the row's timeout, a socket the server closed) is named in ``failures`` and the next
    row runs."""
    from websockets.exceptions import ConnectionClosed

    from memory.lib.spec import EXIT_DEBOUNCE_SECONDS

    (warm_up,) = await asyncio.to_thread(population.clients, 1)
    try:
        socket = await connect(server, warm_up)
        await converse(socket, messages=2, tag="warm-up", reply="long")  # imports, pools, caches
        await socket.close()
    except (TurnFailed, ConnectionClosed) as failed:
        failures.append(f"{server.label}, warm-up: {failed}")
        return []
    rows = []
    for clients, reply, messages, history in plan:
        await asyncio.sleep(EXIT_DEBOUNCE_SECONDS + SETTLE_SECONDS)
        row_clients = await asyncio.to_thread(population.clients, clients, history=history)
        users = "returning" if history else "new"
        try:
            row = await asyncio.wait_for(
                run_row(server, row_clients, messages=messages, reply=reply, users=users),
                timeout=timeout,
            )
        except (TurnFailed, TimeoutError, ConnectionClosed) as failed:  # fails at the end
            print(
                f"  {server.label}: {clients} {users} clients, {reply} replies: FAILED: "
                f"{failed or 'row timeout'}",
                file=sys.stderr,
                flush=True,
            )
            failures.append(f"{server.label}, {clients} {users} clients, {reply}: {failed}")
            continue
        rows.append(row)
        print(
            f"  {server.label}: {clients} {users} clients, {reply} replies: {row['turns']} "
            f"turns in {row['seconds']:.1f} s, {row['cpu_ms_per_turn']:.1f} ms CPU/turn, "
            f"{row['sql_per_turn']:.1f} SQL and {row['redis_per_turn']:.1f} Redis per turn",
            file=sys.stderr,
            flush=True,
        )
    return rows


# --- the run ---------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chat_load", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--embedded", action="store_true", help="SQLite, one process only")
    parser.add_argument("--clients", type=int, default=10, help="clients of the CPU rows")
    parser.add_argument("--load-clients", type=int, default=100, help="clients of the load row")
    parser.add_argument("--messages", type=int, default=4, help="messages each client sends")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the three servers")
    parser.add_argument("--row-timeout", type=float, default=600.0, help="seconds per row")
    parser.add_argument("--rows", default="cpu,load", help="which rows: cpu, load or both")
    parser.add_argument(
        "--unembedded-history",
        action="store_true",
        help="returning users' earlier messages without the vectors evaluations store",
    )
    args = parser.parse_args()
    if not 1 <= args.clients <= 500 or not 1 <= args.load_clients <= 500:
        parser.error("clients must be 1..500")
    if not 1 <= args.messages <= 100 or not 1 <= args.repeats <= 20:
        parser.error("messages must be 1..100 and repeats 1..20")
    plans = _plans(args)
    env = configure(embedded=args.embedded)
    wanted = {part.strip() for part in args.rows.split(",")}
    if not wanted or not wanted <= {"cpu", "load"}:
        parser.error("rows: cpu, load or cpu,load")
    servers = [
        (label, workers, server_env, tuple(kind for kind in kinds if kind in wanted))
        for label, workers, server_env, kinds in SERVERS
        if not (args.embedded and workers > 1) and wanted & set(kinds)
    ]
    started = time.perf_counter()
    rows, model_calls, failures = _run(args, env, servers, plans)
    code = _report(args, env, rows, time.perf_counter() - started, model_calls)
    for failure in failures:
        print(f"chat load: a row failed: {failure}")
    return 1 if failures else code


def _plans(args) -> dict:
    """The rows: (clients, reply, messages each, earlier messages of each user)."""
    cpu_messages = max(args.messages, math.ceil(40 / args.clients))
    return {
        "cpu": [
            (args.clients, "short", cpu_messages, 0),
            (args.clients, "long", cpu_messages, 0),
            (args.clients, "long", cpu_messages, RETURNING_HISTORY),
        ],
        "load": [(args.load_clients, "long", args.messages, 0)],
    }


def _run(args, env, servers: list, plans: dict) -> tuple[list[dict], int, list[str]]:
    """Every repeat of every server; returns the rows and the model calls made."""
    rows: list[dict] = []
    failures: list[str] = []
    fake = server = None
    try:
        setup_django()
        from tests.fake_openai import FakeOpenAI

        fake = FakeOpenAI(responder=respond)
        population = Population(history_vectors=not args.unembedded_history)
        model_env = {
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "bench-key",
            "DRIFT_DETECTOR": "lexical",
            # Turns against a zero-latency model hold a connection briefly: a small pool
            # per process leaves the shared PostgreSQL room for everything else.
            "DATABASE_POOL_SIZE": "12",
        }
        for repeat in range(args.repeats):
            for label, workers, server_env, kinds in servers:
                plan = [row for kind in kinds for row in plans[kind]]
                server = Server(
                    env={**env.env, **model_env, **server_env},
                    workdir=env.workdir,
                    workers=workers,
                    label=label,
                )
                server.wait_until_ready()
                print(f"chat load, repeat {repeat + 1}: {label}; {env.label}", file=sys.stderr)
                found = asyncio.run(
                    measure_server(
                        server, population, plan, timeout=args.row_timeout, failures=failures
                    )
                )
                rows += [{**row, "repeat": repeat + 1} for row in found]
                server.stop()
                server = None
        model_calls = len(fake.requests)
    except BaseException:
        if server is not None:
            print(f"--- uvicorn log ---\n{server.log()}", file=sys.stderr)
        raise
    finally:
        if server is not None:
            server.stop()
        if fake is not None:
            fake.close()
        tear_down(env)
    return rows, model_calls, failures


def _report(args, env, rows: list[dict], seconds: float, model_calls: int) -> int:
    print(
        f"chat load ({env.label}; make serve's server processes, zero-latency fake model; "
        f"{args.repeats} repeats, {seconds:.0f} s, "
        f"{model_calls} model calls; {os.cpu_count()} cores shared with the bench client)"
    )
    header = ("server", "clients", "reply", "turns/s", "p50 ms", "p95 ms", "server cpu")
    header += ("cpu ms/turn", "sql/turn", "redis/turn", "bench cpu", "other cpu")
    print("  ".join(f"{h:>18}" for h in header))
    medians = _print_medians(rows)
    return _finish(args, rows, medians)


def _print_medians(rows: list[dict]) -> dict:
    """One line per row kind (the medians over the repeats); returns the medians."""
    summary: dict[tuple[str, int, str], list[dict]] = {}
    for row in rows:
        reply = row["reply"] if row["users"] == "new" else f"{row['reply']}, returning"
        summary.setdefault((row["server"], row["clients"], reply), []).append(row)
    medians = {}
    for key, group in summary.items():
        median = {
            name: statistics.median(row[name] for row in group)
            for name in ("turns_per_s", "p50_ms", "p95_ms", "server_cpu_pct")
            + ("cpu_ms_per_turn", "sql_per_turn", "redis_per_turn")
            + ("bench_cpu_pct", "other_cpu_pct")
        }
        spread = [round(row["cpu_ms_per_turn"], 1) for row in group]
        medians[key] = median
        cells = (
            key[0],
            key[1],
            key[2],
            f"{median['turns_per_s']:.1f}",
            f"{median['p50_ms']:.0f}",
            f"{median['p95_ms']:.0f}",
            f"{median['server_cpu_pct']:.0f} %",
            f"{median['cpu_ms_per_turn']:.1f} {spread}",
            f"{median['sql_per_turn']:.1f}",
            f"{median['redis_per_turn']:.1f}",
            f"{median['bench_cpu_pct']:.0f} %",
            f"{median['other_cpu_pct']:.0f} %",
        )
        print("  ".join(f"{c!s:>18}" for c in cells))
    return medians


def _finish(args, rows: list[dict], medians: dict) -> int:
    """The ratios, the explanation and the last JSON line."""

    def cpu(label: str, reply: str, name: str = "cpu_ms_per_turn") -> float | None:
        entry = medians.get((label, args.clients, reply))
        return round(entry[name], 2) if entry else None

    def rate(label: str) -> float | None:
        entry = medians.get((label, args.load_clients, "long"))
        return entry["turns_per_s"] if entry else None

    base, batched, two = (label for label, _, _, _ in SERVERS)
    result = {
        "bench": "chat_load",
        "cpu_ms_per_turn": {
            "per_token": {"short": cpu(base, "short"), "long": cpu(base, "long")},
            "batched": {
                "short": cpu(batched, "short"),
                "long": cpu(batched, "long"),
                "long_returning": cpu(batched, "long, returning"),
            },
        },
        "sql_per_turn": {
            "long": cpu(batched, "long", "sql_per_turn"),
            "long_returning": cpu(batched, "long, returning", "sql_per_turn"),
        },
        "redis_per_turn": {
            "long": cpu(batched, "long", "redis_per_turn"),
            "long_returning": cpu(batched, "long, returning", "redis_per_turn"),
        },
        "short_ratio": _ratio(cpu(batched, "short"), cpu(base, "short")),
        "long_ratio": _ratio(cpu(batched, "long"), cpu(base, "long")),
        "turns_per_s": {"1": rate(batched), "2": rate(two)},
        "scale_2_vs_1": _ratio(rate(two), rate(batched)),
        "load_clients": args.load_clients,
        "returning_history": "unembedded" if args.unembedded_history else "vectors stored",
        "bench_cpu_pct": round(statistics.median(row["bench_cpu_pct"] for row in rows), 1),
        "rows": [
            {
                key: round(value, 2) if isinstance(value, float) else value
                for key, value in row.items()
            }
            for row in rows
        ],
    }
    print(
        "server cpu: every process of the server over the row (100 % = one core). cpu "
        "ms/turn: median of the repeats [each repeat]. bench cpu: this process (clients "
        "and fake model), on the same cores. other cpu: the rest of the machine "
        "(PostgreSQL, Redis, the kernel, anything else running)."
    )
    print(
        f"long replies: batched {result['long_ratio']}× the per-token CPU per turn; short: "
        f"{result['short_ratio']}×. {args.load_clients} clients: 2 processes serve "
        f"{result['scale_2_vs_1']}× the turns per second of 1."
    )
    print(json.dumps(result))
    missed = missed_targets(result)
    for miss in missed:
        print(f"chat load: target missed: {miss}")
    return 1 if missed else 0


def _ratio(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else round(value / base, 3)


if __name__ == "__main__":
    raise SystemExit(main())
