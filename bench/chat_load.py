"""Chat load benchmark: N concurrent websocket clients against a running server.

Usage (from the repository root)::

    python bench/chat_load.py [--embedded] [--clients 1,10,100] [--messages 5]

It starts everything it needs and stops it again: a zero-latency fake OpenAI-compatible
model in this process (tests/fake_openai.py, answering every request at once), and a
daphne server as a subprocess on a free loopback port, pointed at the fake model through
``OPENAI_BASE_URL``. The server runs the real ASGI application with the production
settings, except that evaluations (every tenth message, and two seconds after a
disconnect) run in the server's own timer threads as in the embedded mode, since no
Celery worker is started. Storage is a dedicated PostgreSQL database and Redis (database
15, under a key prefix of its own) for the cache and the channel layer when both answer
on 127.0.0.1, else (or with ``--embedded``) a throwaway SQLite file with the in-process
cache and channel layer. The database is migrated and its users, sessions and login
cookies made before the server starts; all of it is dropped at the end.

For each N, N clients connect (each as its own user, to its own new session, with an
``Origin`` header and the session cookie), then all of them start at once and each sends
its messages one after another, waiting for ``turn.done`` before the next. Each client
sends ``--messages`` messages, more when N is small so every row has at least
``--min-samples`` turns. It reports turns completed per second over the row, and the
added latency from sending a message to its first ``reply.delta`` (the model itself adds
none), as a table and as a last JSON line::

    {"bench": "chat_load", "rows": [{"clients": N, "msgs_per_s": X, "p50_ms": Y, "p95_ms": Z}, ...]}

Between rows it waits for the exit evaluations of the row's disconnects to run, so they
do not land in the next row's figures. Every wait is bounded; a row that cannot finish in
``--row-timeout`` seconds fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REDIS_DB_URL = "redis://127.0.0.1:6379/15"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SETTINGS_MODULE = "chat_load_settings"
RECEIVE_TIMEOUT = 30.0  # one event; a turn against a zero-latency model takes far less
SERVER_START_TIMEOUT = 30.0
SETTLE_SECONDS = 1.5  # after the exit-evaluation debounce, before the next row starts
REPLY_TEXT = "Hello from the zero-latency fake model, streamed word by word."

# The server's settings: the project's own, with evaluations run in-process (no worker)
# and the Redis keys of this run under a prefix of its own.
_SETTINGS_TEMPLATE = """\
from driftless.settings import *  # noqa: F403
from driftless.settings import CACHES, CHANNEL_LAYERS

CELERY_TASK_ALWAYS_EAGER = True
if {prefix!r}:
    CACHES["default"]["KEY_PREFIX"] = {prefix!r}
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = {prefix!r}
"""


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Environment:
    """Where this run keeps its state, and how to remove it."""

    workdir: str
    pg_name: str | None = None
    redis_prefix: str = ""
    env: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        if self.pg_name:
            return "PostgreSQL database, Redis cache and channel layer"
        return "SQLite database, in-process cache and channel layer"


def configure(*, embedded: bool) -> Environment:
    """Choose the storage and write the server's settings module (used here too)."""
    workdir = tempfile.mkdtemp(prefix="bench-chat-load-")
    env = Environment(workdir=workdir)
    services = not embedded and _reachable(5432) and _reachable(6379)
    values = {
        "SECRET_KEY": "bench-only-secret-key",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DRIFTLESS_VAR_DIR": workdir,
        "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
        "LOG_LEVEL": "WARNING",
        "LLM_MAX_RETRIES": "0",
        "PYTHONPATH": os.pathsep.join([str(ROOT), workdir]),
    }
    if services:
        import psycopg

        env.pg_name = f"bench_chat_load_{os.getpid()}"
        env.redis_prefix = f"benchchat{os.getpid()}"
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{env.pg_name}"')
        values["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{env.pg_name}"
        values["REDIS_URL"] = REDIS_DB_URL
    Path(workdir, f"{SETTINGS_MODULE}.py").write_text(
        _SETTINGS_TEMPLATE.format(prefix=env.redis_prefix)
    )
    for name in ("DATABASE_URL", "REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    os.environ.update(values)
    env.env = values
    sys.path.insert(0, workdir)
    return env


def tear_down(env: Environment) -> None:
    """Drop the database, the Redis keys of this run and the temporary directory."""
    from django.db import connections

    connections.close_all()
    if env.redis_prefix:
        import redis

        client = redis.Redis.from_url(REDIS_DB_URL)
        for key in client.scan_iter(match=f"{env.redis_prefix}*", count=500):
            client.delete(key)
        client.close()
    if env.pg_name:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{env.pg_name}" WITH (FORCE)')
    shutil.rmtree(env.workdir, ignore_errors=True)


@dataclass(frozen=True)
class Client:
    """One simulated user: their session and the cookie that logs them in."""

    session_id: int
    cookie: str


def prepare(*, rows: list[tuple[int, int]]) -> tuple[Client, list[list[Client]]]:
    """Migrate, then make one user per client of the largest row and, for every row, a
    new session per client (a session starts empty in each row), plus a warm-up one."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client as DjangoClient

    from memory.models import Agent, Organization, Session

    call_command("migrate", verbosity=0)
    organization = Organization.objects.create(name="Bench", slug="bench")
    agent = Agent.objects.create(
        organization=organization,
        name="Bench",
        soul="You are Bench, a patient assistant under load.",
        skills="Answering quickly.",
    )
    users = []
    cookies = []
    for index in range(max(clients for clients, _ in rows) + 1):
        user = get_user_model().objects.create_user(f"bench{index}", password=None)
        organization.members.add(user)
        browser = DjangoClient()
        browser.force_login(user)
        users.append(user)
        cookies.append(
            f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
        )

    def client_for(index: int) -> Client:
        session = Session.objects.start(user=users[index], agent=agent)
        return Client(session_id=session.pk, cookie=cookies[index])

    warm_up = client_for(len(users) - 1)
    per_row = [[client_for(index) for index in range(clients)] for clients, _ in rows]
    return warm_up, per_row


class Server:
    """daphne in a subprocess, serving the project's ASGI application on loopback."""

    def __init__(self, *, env: dict[str, str], workdir: str) -> None:
        self.port = _free_port()
        self.log_path = Path(workdir, "daphne.log")
        self._log = self.log_path.open("wb")
        command = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-v",
            "0",
            "driftless.asgi:application",
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
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.process.returncode}:\n{self.log()}")
            if _reachable(self.port):
                return
            time.sleep(0.1)
        raise RuntimeError(
            f"daphne did not listen within {SERVER_START_TIMEOUT:g} s:\n{self.log()}"
        )

    def cpu_seconds(self) -> float | None:
        """CPU time the server process has used so far, all its threads (Linux only)."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log(self, limit: int = 4000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-limit:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
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


async def converse(socket, *, messages: int, tag: str) -> list[float]:
    """Send ``messages`` messages one after another; the latency of each to its first
    reply delta, in seconds."""
    latencies = []
    for number in range(messages):
        content = f"Message {number + 1} from {tag}: how is the load today?"
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
                    f"after {seen or 'nothing'}"
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


async def run_row(server: Server, clients: list[Client], *, messages: int) -> dict:
    sockets = await asyncio.gather(*(connect(server, client) for client in clients))
    try:
        server_cpu, own_cpu = server.cpu_seconds(), time.process_time()
        started = time.perf_counter()
        results = await asyncio.gather(
            *(
                converse(socket, messages=messages, tag=f"session {client.session_id}")
                for socket, client in zip(sockets, clients, strict=True)
            )
        )
        elapsed = time.perf_counter() - started
        own_cpu = time.process_time() - own_cpu
        if server_cpu is not None:
            server_cpu = (server.cpu_seconds() or 0.0) - server_cpu
    finally:
        await asyncio.gather(*(socket.close() for socket in sockets), return_exceptions=True)
    latencies = sorted(latency for result in results for latency in result)
    return {
        "clients": len(clients),
        "turns": len(latencies),
        "seconds": elapsed,
        "msgs_per_s": len(latencies) / elapsed,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * _percentile(latencies, 95),
        "max_ms": 1000 * latencies[-1],
        # Where the time goes: a share near 100 % is one core busy (the GIL's limit).
        "server_cpu_pct": None if server_cpu is None else 100 * server_cpu / elapsed,
        "server_cpu_ms_per_turn": None
        if server_cpu is None
        else 1000 * server_cpu / len(latencies),
        "bench_cpu_pct": 100 * own_cpu / elapsed,
    }


def _percentile(ordered: list[float], percent: float) -> float:
    """The nearest-rank percentile of sorted values (an actual observed latency)."""
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


async def measure(
    server: Server, warm_up: Client, per_row: list[list[Client]], *, rows, row_timeout: float
) -> list[dict]:
    from memory.constants import EXIT_DEBOUNCE_SECONDS

    socket = await connect(server, warm_up)
    await converse(socket, messages=2, tag="warm-up")  # imports, client pools, caches
    await socket.close()
    results = []
    for (clients, messages), row_clients in zip(rows, per_row, strict=True):
        await asyncio.sleep(EXIT_DEBOUNCE_SECONDS + SETTLE_SECONDS)
        row = await asyncio.wait_for(
            run_row(server, row_clients, messages=messages), timeout=row_timeout
        )
        results.append(row)
        print(
            f"  {clients:>4} clients: {row['turns']} turns in {row['seconds']:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return results


# --- the run ---------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedded", action="store_true", help="SQLite and in-process layers")
    parser.add_argument("--clients", default="1,10,100", help="comma-separated client counts")
    parser.add_argument("--messages", type=int, default=5, help="messages each client sends")
    parser.add_argument("--min-samples", type=int, default=40, help="fewest turns in a row")
    parser.add_argument("--row-timeout", type=float, default=300.0, help="seconds per row")
    args = parser.parse_args()
    counts = [int(part) for part in args.clients.split(",") if part.strip()]
    if not counts or min(counts) < 1 or max(counts) > 500:
        parser.error("clients must be 1..500")
    if not 1 <= args.messages <= 100 or not 1 <= args.min_samples <= 100:
        parser.error("messages and min-samples must be 1..100")
    rows = [(n, max(args.messages, math.ceil(args.min_samples / n))) for n in counts]

    env = configure(embedded=args.embedded)
    server = fake = None
    try:
        import django

        django.setup()
        from tests.fake_openai import FakeOpenAI

        fake = FakeOpenAI(default_text=REPLY_TEXT)
        warm_up, per_row = prepare(rows=rows)
        from django.db import connections

        connections.close_all()
        model_env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "bench-key"}
        started = time.perf_counter()
        server = Server(env={**env.env, **model_env}, workdir=env.workdir)
        server.wait_until_ready()
        print(f"chat load: daphne on 127.0.0.1:{server.port}; {env.label}", file=sys.stderr)
        results = asyncio.run(
            measure(server, warm_up, per_row, rows=rows, row_timeout=args.row_timeout)
        )
        model_calls = len(fake.requests)
    except BaseException:
        if server is not None:
            print(f"--- daphne log ---\n{server.log()}", file=sys.stderr)
        raise
    finally:
        if server is not None:
            server.stop()
        if fake is not None:
            fake.close()
        tear_down(env)

    print(
        f"chat load ({env.label}; daphne subprocess, zero-latency fake model; "
        f"{time.perf_counter() - started:.0f} s, {model_calls} model calls)"
    )
    header = (
        "clients",
        "msgs/client",
        "turns",
        "msgs/s",
        "p50 ms",
        "p95 ms",
        "max ms",
        "server cpu",
        "cpu ms/turn",
        "bench cpu",
    )
    print("  ".join(f"{h:>11}" for h in header))
    for (_, messages), row in zip(rows, results, strict=True):
        cells = (
            row["clients"],
            messages,
            row["turns"],
            f"{row['msgs_per_s']:.1f}",
            f"{row['p50_ms']:.1f}",
            f"{row['p95_ms']:.1f}",
            f"{row['max_ms']:.1f}",
            _optional(row["server_cpu_pct"], "{:.0f} %"),
            _optional(row["server_cpu_ms_per_turn"], "{:.1f}"),
            f"{row['bench_cpu_pct']:.0f} %",
        )
        print("  ".join(f"{c:>11}" for c in cells))
    print(
        "server cpu: the daphne process (all threads) over the row; 100 % is one core, the "
        "most one Python process gets. bench cpu: this process (clients and fake model)."
    )
    print(
        json.dumps(
            {
                "bench": "chat_load",
                "rows": [
                    {
                        "clients": row["clients"],
                        "msgs_per_s": round(row["msgs_per_s"], 2),
                        "p50_ms": round(row["p50_ms"], 2),
                        "p95_ms": round(row["p95_ms"], 2),
                    }
                    for row in results
                ],
            }
        )
    )
    return 0


def _optional(value: float | None, template: str) -> str:
    return "n/a" if value is None else template.format(value)


if __name__ == "__main__":
    raise SystemExit(main())
