"""Soak: many turns through real faults, then count what was lost.

Usage (from the repository root; needs PostgreSQL on 127.0.0.1:5432 and redis-server)::

    python -m bench.soak [--sessions 20] [--turns 1000] [--fail-ratio 0.1]

It starts everything it needs and stops it again: a PostgreSQL database of its own, a
private redis-server on a free port (cache, channel layer and broker), the fake
OpenAI-compatible server of the tests in this process (chat replies in words, summaries
as JSON, and a share ``--fail-ratio`` of all calls failing with HTTP 500), the server
(driftless/serve.py) and the worker as `make worker` runs it (Celery with the sweep,
under driftless/supervise.py), both with the production settings. ``--sessions``
clients then send ``--turns`` messages in all over REST, each client one after another,
while Redis is restarted twice and the worker SIGKILLed twice (each at a fixed share of
the turns). At the end each session gets an exit evaluation and the run waits for the
system to settle.

It prints, and ends with one JSON line:

* messages lost: messages the server acknowledged (the user's message in every answer
  that carries it, the reply of every 201) that are not in the database at the end;
* evaluations lost: evaluation requests still due once settled, plus closed topics that
  hold messages and were never summarized;
* summaries erased: topics seen with a model-made summary (the fake's summaries carry a
  marker) that later lost it (polled every second, and at the end);
* the largest prompt in tokens sent to the model (the project's token estimate over the
  request's messages), for chat turns and for summaries.

All three losses must be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import setup_django

ROOT = Path(__file__).resolve().parent.parent

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
MODEL_SUMMARY_MARKER = "[model summary]"
SETTLE_TIMEOUT = 180.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"soak: timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


class Redis:
    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
            + ["--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._answers, 10, "redis-server")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class Group:
    """A process in its own process group, logging to a file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self, timeout: float = 20.0) -> float | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns how long it took to exit
        (None when it had to be killed or had already stopped)."""
        started = time.monotonic()
        took = None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
                took = time.monotonic() - started
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # whatever is left of its group
        except ProcessLookupError:
            pass
        self.process.wait()
        return took


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    found = [int(child) for child in text.split()]
    return found + [grandchild for child in found for grandchild in children(child)]


def kill_worker(supervisor: Group) -> bool:
    """SIGKILL the Celery worker the supervisor runs (and its pool); it starts a new one."""
    pids = children(supervisor.process.pid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return bool(pids)


def responder(body: dict) -> tuple[str, None]:
    """The fake model: JSON summaries for JSON-mode calls, short words otherwise."""
    if body.get("response_format"):  # a summary (json_schema) or drift call
        text = " ".join(str(m.get("content") or "") for m in body["messages"])
        words = [w for w in text.split() if w.isalpha()][-4:] or ["chat"]
        summary = json.dumps(
            {
                "title": "About " + " ".join(words[:3]),
                "summary": f"{MODEL_SUMMARY_MARKER} the user discussed {' '.join(words)}.",
                "include_in_memory": True,
            }
        )
        return summary, None
    return "Noted; here is a short answer about that.", None


def prompt_tokens(body: dict) -> int:
    from memory.lib.tokens import estimate_tokens

    return estimate_tokens("\n".join(str(m.get("content") or "") for m in body["messages"]))


SUBJECTS = [
    "my balcony garden and the tomatoes in pots",
    "the laptop battery that drains overnight",
    "a trip to Lisbon in the spring with the children",
    "learning to bake sourdough bread at home",
    "the budget spreadsheet for the new flat",
]


class Client:
    def __init__(self, server_url: str, session_id: int, token: str, turns: int) -> None:
        self.url = f"{server_url}/agents-api/sessions/{session_id}/messages"
        self.session_id = session_id
        self.token = token
        self.turns = turns
        self.acknowledged: set[int] = set()  # message ids the server said it stored
        self.statuses: Counter = Counter()
        self.random = random.Random(session_id)

    def run(self, progress) -> None:
        subject = self.random.choice(SUBJECTS)
        for number in range(self.turns):
            if self.random.random() < 0.1:
                subject = self.random.choice(SUBJECTS)
            self._send(f"Turn {number}: tell me more about {subject}.")
            progress()

    def _send(self, content: str) -> None:
        body = json.dumps({"content": content}).encode()
        for _attempt in range(60):
            request = urllib.request.Request(
                self.url,
                data=body,
                headers={
                    "Authorization": f"Token {self.token}",
                    "Content-Type": "application/json",
                },
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    status, answer = response.status, json.loads(response.read())
            except urllib.error.HTTPError as error:
                status, answer = error.code, _json(error.read())
            except OSError:
                status, answer = "connection", {}
            self.statuses[status] += 1
            if status in (409, 503, "connection") or "user_message" not in answer:
                time.sleep(0.5)  # not taken (or not known to be): send it again
                continue
            for key in ("user_message", "reply", "error_message"):
                if isinstance(answer.get(key), dict):
                    self.acknowledged.add(answer[key]["id"])
            return
        raise SystemExit(f"soak: session {self.session_id} could not send a message")


def _json(raw: bytes) -> dict:
    try:
        answer = json.loads(raw or b"{}")
    except ValueError:  # an HTML error page
        return {}
    return answer if isinstance(answer, dict) else {}


def configure_django(env: dict[str, str]) -> None:
    """Django in this process on the run's database (the cache in-process)."""
    os.environ.update({k: v for k, v in env.items() if k != "REDIS_URL"})
    os.environ.pop("REDIS_URL", None)
    setup_django(migrate=True)


def make_sessions(count: int) -> list[tuple[int, str]]:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from memory.models import Agent, Organization, Session

    organization = Organization.objects.create(name="Soak", slug="soak")
    agent = Agent.objects.create(organization=organization, name="Soak", soul="You are Soak.")
    made = []
    for index in range(count):
        user = get_user_model().objects.create_user(f"soak{index}", password=None)
        organization.members.add(user)
        session = Session.objects.start(user=user, agent=agent)
        made.append((session.pk, Token.objects.create(user=user).key))
    return made


class SummaryWatch:
    """Topics seen with a model-made summary, and those that later lost it."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.erased: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def check(self) -> None:
        from django.db import connection

        from memory.models import Topic

        rows = dict(Topic.objects.values_list("pk", "summary"))
        for pk, summary in rows.items():
            if MODEL_SUMMARY_MARKER in summary:
                self.seen.add(pk)
            elif pk in self.seen:
                self.erased.add(pk)
        self.erased |= {pk for pk in self.seen if pk not in rows}  # deleted counts too
        connection.close()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.check()
            except Exception as error:  # the shared database may refuse a connection
                print(f"soak: summary check skipped: {error}", file=sys.stderr)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.check()


def settled() -> bool:
    from django.db import connection

    from memory.models import Session

    pending = Session.objects.exclude(evaluation_due_at=None).exists()
    connection.close()
    return not pending


def count_losses(clients: list[Client]) -> dict:
    from memory.models import Message, Session, Topic

    acknowledged = set().union(*(client.acknowledged for client in clients))
    stored = set(Message.objects.filter(pk__in=acknowledged).values_list("pk", flat=True))
    unsummarized = (
        Topic.objects.filter(is_active=False, summarized_at=None).exclude(messages=None).count()
    )
    still_due = Session.objects.exclude(evaluation_due_at=None).count()
    return {
        "messages_acknowledged": len(acknowledged),
        "messages_lost": len(acknowledged - stored),
        "evaluations_lost": still_due + unsummarized,
        "evaluations_still_due": still_due,
        "closed_topics_unsummarized": unsummarized,
        "topics": Topic.objects.count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--fail-ratio", type=float, default=0.1)
    parser.add_argument(
        "--concurrency", type=int, default=5, help="sessions talking at once (each in turn)"
    )
    parser.add_argument("--redis-restarts", type=int, default=2)
    parser.add_argument("--worker-kills", type=int, default=2)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    pg_name = f"bench_soak_{os.getpid()}"
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{pg_name}"')
    redis = Redis()
    redis.start()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DJANGO_"))},
        "DJANGO_SETTINGS_MODULE": "driftless.settings",
        "SECRET_KEY": "bench-only-secret-key",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DRIFTLESS_VAR_DIR": str(workdir),
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{pg_name}",
        "REDIS_URL": redis.url,
        "OPENAI_API_KEY": "bench-key",
        "LLM_MAX_RETRIES": "0",
        "LLM_TIMEOUT_SECONDS": "20",
        "DRIFT_DETECTOR": "lexical",
        "EVALUATION_SWEEP_SECONDS": "2",
        "EVALUATION_SWEEP_GRACE_SECONDS": "10",
        "LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    }
    processes: list[Group] = []
    fake = None
    try:
        configure_django(env)  # before the fake: tests/fake_openai.py imports the models
        from tests.fake_openai import FakeOpenAI

        fake = FakeOpenAI(responder=responder, fail_ratio=args.fail_ratio, seed=7)
        env["OPENAI_BASE_URL"] = fake.base_url
        result = _soak(args, env, fake, redis, workdir, processes)
    finally:  # nothing of this run outlives it, even when it fails
        for process in processes:
            process.stop(timeout=5)
        if fake is not None:
            fake.close()
        redis.kill()
        _teardown(pg_name, workdir)
    _print_table(result)
    print(json.dumps(result))
    if result["messages_lost"] or result["evaluations_lost"] or result["summaries_erased"]:
        sys.exit(1)


def _soak(args, env: dict, fake, redis: Redis, workdir: Path, processes: list) -> dict:
    sessions = make_sessions(args.sessions)
    server, worker, server_url = _start(env, workdir, processes)

    per_session = [args.turns // args.sessions] * args.sessions
    for index in range(args.turns - sum(per_session)):
        per_session[index] += 1
    clients = [
        Client(server_url, session_id, token, turns)
        for (session_id, token), turns in zip(sessions, per_session, strict=True)
    ]
    faults = _faults(args)
    done = 0
    done_lock = threading.Lock()
    injected: list[str] = []

    def progress() -> None:
        nonlocal done
        with done_lock:
            done += 1
            due = faults and done >= faults[0][0] * args.turns
            kind = faults.pop(0)[1] if due else None
        if kind == "redis":
            redis.kill()
            time.sleep(3)
            redis.start()
            injected.append(f"redis restarted at turn {done}")
        elif kind == "worker":
            injected.append(f"worker killed at turn {done}: {kill_worker(worker)}")

    watch = SummaryWatch()
    watch.start()
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for future in [pool.submit(client.run, progress) for client in clients]:
            future.result()
    elapsed = time.monotonic() - started
    settle_seconds = _leave_and_settle(clients, server_url)
    watch.stop()

    losses = count_losses(clients)
    server_exit = server.stop()
    worker.stop()
    return _result(
        args, fake, workdir, clients, injected, losses, watch, elapsed, settle_seconds, server_exit
    )


def _start(env: dict, workdir: Path, processes: list) -> tuple:
    """The server and the supervised worker, started; returns them and the server's URL."""
    port = free_port()
    server = Group(
        [sys.executable, "-m", "driftless.serve", "-b", "127.0.0.1", "-p", str(port)]
        + ["driftless.asgi:application"],
        env,
        workdir / "server.log",
    )
    worker_argv = [sys.executable, "-m", "celery", "-A", "driftless", "worker", "--beat"]
    worker_argv += ["--loglevel=info", "--concurrency=2", "--schedule", str(workdir / "beat")]
    worker = Group(
        [sys.executable, "-m", "driftless.supervise", "--", *worker_argv],
        env,
        workdir / "worker.log",
    )
    processes += [server, worker]
    server_url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _up(server_url), 60, "the server")
    return server, worker, server_url


def _faults(args) -> list[tuple[float, str]]:
    """When each fault strikes (a share of the turns) and what it is, in order."""
    return sorted(
        [
            (share / (args.redis_restarts + 1), "redis")
            for share in range(1, args.redis_restarts + 1)
        ]
        + [
            ((share - 0.5) / (args.worker_kills + 0.5), "worker")
            for share in range(1, args.worker_kills + 1)
        ]
    )


def _leave_and_settle(clients: list, server_url: str) -> float:
    """Everyone leaves, then the run waits for the evaluations; returns the seconds waited."""
    for client in clients:  # everyone leaves: an exit evaluation per session
        request = urllib.request.Request(
            f"{server_url}/agents-api/sessions/{client.session_id}/evaluate",
            data=b"",
            headers={"Authorization": f"Token {client.token}"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30):
            pass
    settle_started = time.monotonic()
    try:
        wait_until(settled, SETTLE_TIMEOUT, "every evaluation to run")
    except SystemExit as timeout:
        print(timeout, file=sys.stderr)
    return time.monotonic() - settle_started


def _result(args, fake, workdir, clients, injected, losses, watch, elapsed, settle, server_exit):
    statuses = sum((client.statuses for client in clients), Counter())
    chat = [prompt_tokens(b) for b in fake.requests if "response_format" not in b]
    summary = [prompt_tokens(b) for b in fake.requests if "response_format" in b]
    worker_log = (workdir / "worker.log").read_text(errors="replace")
    result = {
        "bench": "soak",
        "sessions": args.sessions,
        "turns": args.turns,
        "fail_ratio": args.fail_ratio,
        "model_calls": len(fake.requests),
        "injected_model_failures": fake.injected_failures,
        "faults": injected,
        "worker_restarts_by_supervisor": worker_log.count("starting it again"),
        "worker_hostname_crashes": worker_log.count("has no attribute 'hostname'"),
        "http_statuses": {str(k): v for k, v in sorted(statuses.items(), key=str)},
        **losses,
        "summaries_seen": len(watch.seen),
        "summaries_erased": len(watch.erased),
        "largest_prompt_tokens": max(chat + summary, default=0),
        "largest_chat_prompt_tokens": max(chat, default=0),
        "largest_summary_prompt_tokens": max(summary, default=0),
        "turns_per_s": round(args.turns / elapsed, 2),
        "settle_seconds": round(settle, 1),
        "server_exit_seconds_after_sigterm": round(server_exit, 1) if server_exit else None,
    }
    return result


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/login/", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _teardown(pg_name: str, workdir: Path) -> None:
    from django.db import connections

    connections.close_all()
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
    shutil.rmtree(workdir, ignore_errors=True)


def _print_table(result: dict) -> None:
    rows = [
        ("messages lost", f"{result['messages_lost']} of {result['messages_acknowledged']}"),
        ("evaluations lost", result["evaluations_lost"]),
        ("summaries erased", f"{result['summaries_erased']} of {result['summaries_seen']}"),
        ("largest prompt (tokens)", result["largest_prompt_tokens"]),
        (
            "  chat / summary",
            f"{result['largest_chat_prompt_tokens']} / {result['largest_summary_prompt_tokens']}",
        ),
        (
            "model calls (injected failures)",
            f"{result['model_calls']} ({result['injected_model_failures']})",
        ),
        ("faults", "; ".join(result["faults"])),
        (
            "worker restarts (hostname crashes)",
            f"{result['worker_restarts_by_supervisor']} ({result['worker_hostname_crashes']})",
        ),
        ("HTTP statuses", result["http_statuses"]),
        ("turns per second", result["turns_per_s"]),
        ("settled in (s)", result["settle_seconds"]),
        ("server exit after SIGTERM (s)", result["server_exit_seconds_after_sigterm"]),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
