"""Stop (issue 24): ``turn.cancel`` on the socket, ``POST .../cancel`` over REST. The
running turn stores what had streamed as its reply, marked stopped, and closes the
model's stream."""

from __future__ import annotations

import threading

import pytest
from django.core.cache import cache

from memory.actions import turn as turn_module
from memory.actions.turn import do_send_message, do_stop_turn
from memory.llm import Completion
from memory.stores import stops


class EndlessModel:
    """A model that writes word after word until its stream is closed; ``on_word`` runs
    after each word it yields (the test stops it from there)."""

    name = "endless"
    offline = False

    def __init__(self, on_word=None) -> None:
        self.on_word = on_word or (lambda n: None)
        self.closed = threading.Event()
        self.words = 0

    def stream(self, **_kwargs):
        try:
            for n in range(10_000):
                self.words = n + 1
                yield f"word{n} "
                self.on_word(n + 1)
            yield Completion(content="never", tool_calls=(), usage=None, model=self.name)
        finally:
            self.closed.set()

    def complete_json(self, **_kwargs):
        raise AssertionError("not asked")


@pytest.fixture
def events(published):
    """Every event published to the session's sockets, in order (schema-checked)."""
    return published.events


def use_model(monkeypatch, model) -> None:
    monkeypatch.setattr(turn_module, "get_chat_model", lambda *args, **kwargs: model)


@pytest.mark.django_db(transaction=True)
def test_stop_stores_what_had_streamed_marked_stopped_and_closes_the_stream(
    session, monkeypatch, events
):
    model = EndlessModel(on_word=lambda n: n == 3 and do_stop_turn(session=session))
    use_model(monkeypatch, model)

    result = do_send_message(session=session, content="Tell me everything")

    assert result.stopped and result.failure is None
    assert result.reply.stopped is True
    # What the turn had read when it saw the Stop is kept: whole words, from the first.
    kept = result.reply.content.split()
    assert kept and kept == [f"word{n}" for n in range(len(kept))]
    assert model.closed.wait(5) and model.words < 10_000  # the stream was closed
    done = events[-1]
    assert done["type"] == "turn.done" and done["ok"] is True and done["stopped"] is True
    assert done["reply_message_id"] == result.reply.pk
    (created,) = [
        e["message"]
        for e in events
        if e["type"] == "message.created" and e["message"]["role"] == "assistant"
    ]
    assert created["stopped"] is True and created["content"] == result.reply.content
    streamed = "".join(e["delta"] for e in events if e["type"] == "reply.delta")
    assert streamed == result.reply.content  # the page shows exactly what is stored


@pytest.mark.django_db(transaction=True)
def test_a_stop_asked_through_the_cache_reaches_a_turn_in_another_process(
    session, monkeypatch, events
):
    """Another process only shares the cache: its request is a new token under the key."""

    def from_elsewhere(n: int) -> None:
        if n == 2:
            cache.set(stops._key(session.pk), "another process asked")

    use_model(monkeypatch, EndlessModel(on_word=from_elsewhere))
    monkeypatch.setattr(stops, "CHECK_SECONDS", 0.0)

    result = do_send_message(session=session, content="Go on")

    assert result.reply.stopped and result.reply.content.startswith("word0 ")


@pytest.mark.django_db(transaction=True)
def test_a_stop_with_no_turn_running_stops_nothing_later(session, monkeypatch, events):
    assert do_stop_turn(session=session) is False
    model = EndlessModel(on_word=lambda n: n == 5 and do_stop_turn(session=session))
    use_model(monkeypatch, model)

    result = do_send_message(session=session, content="Now")

    # The earlier request stopped nothing: the turn ran until the later one.
    assert result.reply.stopped and result.reply.content.startswith("word0 ")
    assert model.words >= 5


@pytest.mark.django_db(transaction=True)
def test_a_reply_that_finishes_is_not_marked_stopped(session, events):
    result = do_send_message(session=session, content="Hello")  # the offline model

    assert result.reply.stopped is False and result.stopped is False
    assert events[-1]["stopped"] is False


@pytest.mark.django_db(transaction=True)
def test_rest_cancel_answers_whether_a_turn_was_running(session, client, bob, monkeypatch):
    client.force_login(session.user)
    url = f"/agents-api/sessions/{session.pk}/cancel"
    answer = client.post(url)
    assert answer.status_code == 202 and answer.json() == {"running": False}

    seen: dict = {}

    def stop_by_rest(n: int) -> None:
        if n == 2:
            seen["answer"] = client.post(url)

    use_model(monkeypatch, EndlessModel(on_word=stop_by_rest))
    reply = client.post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": "Hi"}, "application/json"
    )
    assert seen["answer"].status_code == 202 and seen["answer"].json() == {"running": True}
    assert reply.status_code == 201
    assert reply.json()["reply"]["stopped"] is True
    assert reply.json()["reply"]["content"].startswith("word0 ")

    client.force_login(bob)
    assert client.post(url).status_code == 404  # not bob's session


class SilentModel:
    """A model still reading a long prompt: no token until ``gate`` opens."""

    name = "silent"
    offline = False

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.asked = threading.Event()

    def stream(self, **_kwargs):
        self.asked.set()
        self.gate.wait(30)
        yield "too late "
        yield Completion(content="too late ", tool_calls=(), usage=None, model=self.name)

    def complete_json(self, **_kwargs):
        raise AssertionError("not asked")


@pytest.mark.django_db(transaction=True)
def test_stop_ends_the_turn_while_the_model_has_not_said_a_word_yet(session, monkeypatch):
    """The first token of a cold prompt can take half a minute: Stop must not wait for it."""
    model = SilentModel()
    use_model(monkeypatch, model)

    def stop_once_asked() -> None:
        model.asked.wait(10)
        do_stop_turn(session=session)

    threading.Thread(target=stop_once_asked, daemon=True).start()
    try:
        result = do_send_message(session=session, content="A long question")
        assert not model.gate.is_set()  # the turn ended while the model was still silent
    finally:
        model.gate.set()
    assert result.stopped and result.reply.stopped and result.reply.content == ""
