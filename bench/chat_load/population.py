"""The chat-load bench's users: made for each row, each with a login cookie and a fresh
session; a returning user has earlier chats that recall finds (with the sentence
vectors their evaluations stored). And the long replies the
fake model streams."""

from __future__ import annotations

from dataclasses import dataclass

_SENTENCES = (
    "Start with the simplest version that works and measure it before changing anything.",
    "Keep the old setting around for a week, so you can compare both under real traffic.",
    "If the numbers disagree with your intuition, trust the numbers and look for the cause.",
    "Write down what you tried, including what failed; it saves the next person an afternoon.",
    "A small, boring change shipped today beats a clever one that waits for next quarter.",
    "When two options look equal, pick the one that is easier to undo.",
)


def long_reply(number: int) -> str:
    """60–150 words, different from message to message."""
    words: list[str] = []
    target = 60 + (number * 37) % 91
    index = number
    while len(words) < target:
        words += _SENTENCES[index % len(_SENTENCES)].split()
        index += 1
    return " ".join(words[:target])


@dataclass(frozen=True)
class Client:
    """One simulated user: their session and the cookie that logs them in."""

    session_id: int
    cookie: str


class Population:
    """Users made for each row (a row's users are new, so rows compare), each with a login
    cookie and a fresh session; a returning user has earlier chats (``history``
    messages in a session of their own) that recall finds."""

    def __init__(self, *, history_vectors: bool = True) -> None:
        from django.core.management import call_command

        from memory.models import Agent, Organization

        call_command("migrate", verbosity=0)
        self.organization = Organization.objects.create(name="Bench", slug="bench")
        self.agent = Agent.objects.create(
            organization=self.organization,
            name="Bench",
            soul="You are Bench, a patient assistant under load.",
            skills="Answering quickly.",
        )
        self.made = 0
        self.history_vectors = history_vectors

    def _user(self) -> tuple[object, str]:
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.test import Client as DjangoClient

        self.made += 1
        user = get_user_model().objects.create_user(f"bench{self.made}", password=None)
        self.organization.members.add(user)
        browser = DjangoClient()
        browser.force_login(user)
        cookie = browser.cookies[settings.SESSION_COOKIE_NAME].value
        return user, f"{settings.SESSION_COOKIE_NAME}={cookie}"

    def _history(self, user, messages: int) -> None:
        """An earlier session of ``messages`` messages, said as the bench's turns say them,
        with the sentence vectors its evaluations stored (the drift check stores every
        message's, the refresh its topic's: memory/actions/evaluation.py), unless
        ``history_vectors`` is off: then recall embeds the history again in the turns
        (memory/stores/vectors.py ``read_vectors``), as for a history no evaluation saw."""
        from memory.models import Message, Session
        from memory.stores.vectors import message_vectors, topic_vectors

        session = Session.objects.start(user=user, agent=self.agent, title="Earlier")
        topic = session.topics.get()
        rows = []
        for seq in range(1, messages + 1):
            number = seq // 2
            if seq % 2:
                role, content = Message.Role.USER, f"long {number}: message {number} from an "
                content += "earlier day: how was the load then?"
            else:
                role, content = Message.Role.ASSISTANT, long_reply(number)
            rows.append(Message(session=session, topic=topic, seq=seq, role=role, content=content))
        Message.objects.bulk_create(rows)
        Session.objects.filter(pk=session.pk).update(
            message_count=messages, conversation_count=messages
        )
        topic.is_active = False
        topic.title = "Earlier load"
        topic.save(update_fields=["is_active", "title"])
        if self.history_vectors:
            message_vectors(Message.objects.filter(topic=topic))
            topic_vectors([topic])
        session.topics.create(title="", is_active=True)

    def clients(self, count: int, *, history: int = 0) -> list[Client]:
        from django.db import connections

        from memory.models import Session

        made = []
        for _ in range(count):
            user, cookie = self._user()
            if history:
                self._history(user, history)
            session = Session.objects.start(user=user, agent=self.agent)
            made.append(Client(session_id=session.pk, cookie=cookie))
        connections.close_all()
        return made
