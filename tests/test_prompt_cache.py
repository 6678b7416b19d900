"""Provider prompt caching, seen from the wire: what the fake server receives turn after
turn, and how the usage it reports is stored and summed for the session.

The provider caches a request's longest previously seen prefix, so the first system
message (the stable prefix) must not change by a single byte between turns unless one of
its inputs did, and the ``prompt_cache_key`` must route every turn of a scope alike.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from memory.actions.turn import do_send_message
from memory.llm import Usage
from memory.models import Session
from memory.stores.facts import set_fact
from memory.stores.messages import usage_totals


def stable_prefix(request: dict) -> str:
    """The first message of a request exactly as it crossed the wire."""
    first = request["messages"][0]
    assert first["role"] == "system"
    return first["content"]


def api_client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_stable_prefix_sent_is_byte_identical_across_turns_with_nothing_changed(
    session, fake_openai
):
    for text in ("First question", "Second question", "Third question"):
        do_send_message(session=session, content=text)

    prefixes = [stable_prefix(request).encode("utf-8") for request in fake_openai.requests]
    assert len(prefixes) == 3
    assert prefixes[0] == prefixes[1] == prefixes[2]
    assert prefixes[0].startswith(b"You are Drift.")
    # Only the volatile suffix grew: each request extends the one before it.
    first, second, third = fake_openai.requests
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert third["messages"][: len(second["messages"])] == second["messages"]


def test_the_prompt_cache_key_is_sent_and_identical_on_every_request_of_the_session(
    session, fake_openai
):
    fake_openai.reply_tool_calls([("important_info", {"operation": "read"})])
    fake_openai.reply_text("Nothing stored yet.")
    do_send_message(session=session, content="What do you know about me?")
    do_send_message(session=session, content="And now?")

    keys = [request.get("prompt_cache_key") for request in fake_openai.requests]
    assert len(keys) == 3  # two rounds of the first turn, one of the second
    assert keys == [session.prompt_cache_key] * 3
    assert session.prompt_cache_key == f"driftless:{session.memory_scope_key}"


def test_the_prompt_cache_key_is_per_scope_not_per_user_session(session, alice, bob, agent):
    another_of_alices = Session.objects.start(user=alice, agent=agent)
    bobs = Session.objects.start(user=bob, agent=agent)

    assert another_of_alices.prompt_cache_key == session.prompt_cache_key
    assert bobs.prompt_cache_key != session.prompt_cache_key


def test_a_fact_set_by_a_tool_changes_the_stable_prefix_from_the_next_turn_on(session, fake_openai):
    do_send_message(session=session, content="Hello")
    fake_openai.reply_tool_calls(
        [("important_info", {"operation": "$set", "key": "tea", "value": "green"})]
    )
    fake_openai.reply_text("Noted: green tea.")
    do_send_message(session=session, content="I drink green tea.")
    do_send_message(session=session, content="What do I drink?")

    before, call_round, result_round, after = map(stable_prefix, fake_openai.requests)
    # The stack is assembled once per turn: the turn that set the fact keeps its prefix.
    assert before == call_round == result_round
    assert "- tea (set " not in before
    assert after != before
    assert "- tea (set " in after and "): green" in after
    assert len({request["prompt_cache_key"] for request in fake_openai.requests}) == 1


def test_a_fact_set_outside_the_turn_changes_the_stable_prefix(session, alice, agent, fake_openai):
    do_send_message(session=session, content="Hello")
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")
    do_send_message(session=session, content="Where do I live?")

    before, after = map(stable_prefix, fake_openai.requests)
    assert before != after
    assert "- city (set " in after and "): Lyon" in after


def test_a_note_changes_the_semi_stable_layer_but_never_the_stable_prefix(session, fake_openai):
    do_send_message(session=session, content="Hello")
    fake_openai.reply_tool_calls([("notes", {"operation": "$set", "content": "decided: teal"})])
    fake_openai.reply_text("Noted.")
    do_send_message(session=session, content="We chose teal.")
    do_send_message(session=session, content="Which colour?")

    first, *_, last = fake_openai.requests
    assert stable_prefix(first) == stable_prefix(last)
    assert "decided: teal" not in stable_prefix(last)
    assert last["messages"][1]["role"] == "system"
    assert "decided: teal" in last["messages"][1]["content"]


def test_usage_reported_by_the_server_is_stored_on_each_reply_and_summed_for_the_session(
    session, alice, fake_openai
):
    fake_openai.reply_text("One.", usage=Usage(300, 0, 3))
    fake_openai.reply_tool_calls(
        [("important_info", {"operation": "read"})],
        usage=Usage(320, 256, 9),
    )
    fake_openai.reply_text("Two.", usage=Usage(380, 320, 4))

    first = do_send_message(session=session, content="First")
    second = do_send_message(session=session, content="Second")

    first.reply.refresh_from_db()
    assert (first.reply.prompt_tokens, first.reply.cached_tokens) == (300, 0)
    assert first.reply.completion_tokens == 3
    call_message = second.activity[0]
    call_message.refresh_from_db()
    assert (call_message.prompt_tokens, call_message.cached_tokens) == (320, 256)
    second.reply.refresh_from_db()
    assert (second.reply.prompt_tokens, second.reply.cached_tokens) == (380, 320)
    assert second.reply.completion_tokens == 4
    # The user's messages and the tool results carry no usage of their own.
    assert second.user_message.prompt_tokens is None
    assert second.activity[1].prompt_tokens is None

    expected = {
        "prompt_tokens": 1000,
        "cached_tokens": 576,
        "completion_tokens": 16,
        "cache_hit_ratio": 0.576,
    }
    assert usage_totals(session_id=session.pk) == expected
    detail = api_client(alice).get(f"/agents-api/sessions/{session.pk}/")
    assert detail.status_code == 200
    assert detail.json()["usage"] == expected
    inspector = api_client(alice).get(f"/agents-api/sessions/{session.pk}/context")
    assert inspector.status_code == 200
    assert inspector.json()["cache"] == {
        "prompt_tokens": 1000,
        "cached_tokens": 576,
        "hit_rate": 0.576,
    }


def test_the_admin_shows_the_summed_cache_hits_of_the_turns(client, session, fake_openai):
    fake_openai.reply_text("One.", usage=Usage(200, 0, 2))
    fake_openai.reply_text("Two.", usage=Usage(200, 150, 2))
    do_send_message(session=session, content="First")
    do_send_message(session=session, content="Second")
    operator = get_user_model().objects.create_superuser("operator", "op@example.com", "pw")
    client.force_login(operator)

    page = client.get(f"/admin/memory/session/{session.pk}/change/").content.decode()

    assert "150 / 400 (38%)" in page


def test_usage_of_another_session_never_counts_towards_this_one(session, bob, agent, fake_openai):
    fake_openai.reply_text("Mine.", usage=Usage(100, 50, 1))
    fake_openai.reply_text("Bob's.", usage=Usage(900, 0, 9))
    do_send_message(session=session, content="Hi")
    bobs = Session.objects.start(user=bob, agent=agent)
    do_send_message(session=bobs, content="Hi")

    assert usage_totals(session_id=session.pk)["prompt_tokens"] == 100
    assert usage_totals(session_id=bobs.pk)["prompt_tokens"] == 900
    assert api_client(bob).get(f"/agents-api/sessions/{session.pk}/context").status_code == 404
