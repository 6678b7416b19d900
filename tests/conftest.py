"""Shared fixtures: personas, scope builders and service checks."""

import json

import pytest
from channels.layers import InMemoryChannelLayer
from django.conf import settings
from django.core.cache import cache

from memory.infra.channels import forget_missed
from memory.infra.outage import broker_breaker, channel_breaker
from memory.models import Agent, Organization, Session
from tests.event_shapes import event_problems

pytest_plugins = ["tests.fake_openai"]


def pytest_collection_modifyitems(config, items):
    """Skip service-bound tests, with the reason, where the service is not reachable;
    run browser tests last (Playwright's sync API leaves an event loop behind)."""
    for item in items:
        for service in ("postgres", "redis"):
            if item.get_closest_marker(service) and not settings.SERVICES[service]:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"{service} is not reachable on 127.0.0.1; ran embedded"
                    )
                )
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache (only this run's keys are touched), and with
    no service marked as down by an earlier test's outage (memory/infra/outage.py)."""
    if hasattr(cache, "delete_pattern"):
        cache.delete_pattern("*")
    else:
        cache.clear()
    broker_breaker.reset()
    channel_breaker.reset()
    forget_missed()
    yield


class PublishedEvents:
    """What the server published to sessions' sockets during a test, and how any of it
    differs from docs/websocket-events.schema.json."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.deliveries: list[list[str]] = []  # the event types of each group message
        self.problems: list[str] = []

    def check(self, event: object, *, record: bool) -> None:
        if record:
            self.events.append(event)
        self.problems.extend(event_problems(event))


@pytest.fixture(autouse=True)
def published(monkeypatch):
    """Every event published to a session's sockets, and every frame a consumer sends,
    checked against docs/websocket-events.schema.json: a test during which the server
    sent an event that differs from its documented shape fails."""
    from chat.consumers import SessionConsumer
    from driftless.channel_layer import RedisChannelLayer

    seen = PublishedEvents()
    for layer in (InMemoryChannelLayer, RedisChannelLayer):
        monkeypatch.setattr(layer, "group_send", _checked_group_send(layer.group_send, seen))
    blocking = RedisChannelLayer.group_send_blocking

    def checked_blocking(self, group, message):
        _check_delivery(message, seen)
        return blocking(self, group, message)

    monkeypatch.setattr(RedisChannelLayer, "group_send_blocking", checked_blocking)
    send = SessionConsumer.send

    async def checked_send(self, text_data=None, bytes_data=None, close=False):
        if text_data is not None:
            seen.check(json.loads(text_data), record=False)
        return await send(self, text_data=text_data, bytes_data=bytes_data, close=close)

    monkeypatch.setattr(SessionConsumer, "send", checked_send)
    yield seen
    if seen.problems:
        pytest.fail(
            "events differ from docs/websocket-events.schema.json:\n" + "\n".join(seen.problems)
        )


def _checked_group_send(group_send, seen: PublishedEvents):
    async def checked(self, group, message):
        _check_delivery(message, seen)
        return await group_send(self, group, message)

    return checked


def _check_delivery(message, seen: PublishedEvents) -> None:
    if isinstance(message, dict) and message.get("type") == "session.events":
        seen.deliveries.append([event.get("type") for event in message.get("events", ())])
        for event in message.get("events", ()):
            seen.check(event, record=True)


@pytest.fixture
def organization(db):
    return Organization.objects.create(name="Acme", slug="acme")


@pytest.fixture
def agent(organization):
    return Agent.objects.create(
        organization=organization, name="Drift", soul="You are Drift.", skills="Remembering."
    )


def make_user(username: str, organization: Organization | None = None):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username=username, password="pw-" + username)
    if organization is not None:
        organization.members.add(user)
    return user


@pytest.fixture
def alice(organization):
    """Owns the sessions under test."""
    return make_user("alice", organization)


@pytest.fixture
def bob(organization):
    """A member of the same organization: still a stranger to alice's sessions."""
    return make_user("bob", organization)


@pytest.fixture
def charlie(db):
    """Belongs to no organization at all."""
    return make_user("charlie")


def logged_in(user):
    """A test client with ``user`` logged in."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def as_alice(alice):
    return logged_in(alice)


@pytest.fixture
def as_bob(bob):
    return logged_in(bob)


@pytest.fixture
def session(alice, agent) -> Session:
    return Session.objects.start(user=alice, agent=agent)
