"""Run by tests/test_backup.py through ``manage.py shell``: ``populate()`` writes a scene of
two users (Unicode text, facts, promoted and deprecated topics, notes, a token) and
``snapshot()`` prints, as one JSON line, every user's memory, facts, topics, messages and
what search finds, keyed by names, never by database ids."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from memory.models import Agent, ImportantInfo, Message, Notes, Organization, Session, Topic
from memory.stores.search import search_memory
from tests.memory_builders import add_messages, add_topic


def populate() -> None:
    organization = Organization.objects.create(name="Acme", slug="acme")
    agent = Agent.objects.create(organization=organization, name="Drift", soul="You are Drift.")
    for name, word in (("alice", "Grenoble"), ("bérénice", "東京")):
        user = get_user_model().objects.create_user(username=name, password="pw-" + name)
        organization.members.add(user)
        Token.objects.create(user=user)
        session = Session.objects.start(user=user, agent=agent, title=f"Plans of {name}")
        kept = add_topic(
            session,
            title=f"Trip to {word}",
            summary=f"{name} goes to {word}.",
            keep=True,
            messages=6,
        )
        add_topic(session, title="Old idea", summary="Dropped.", deprecated=True, messages=4)
        add_messages(session, 4, prefix=f"{word} — ünïcödé ✓ ")
        Notes.objects.create(topic=kept, content=f"Book the train to {word}")
        ImportantInfo.objects.create(
            user=user,
            agent=agent,
            organization=organization,
            data={"home_city": word, "language": "fr"},
        )


def snapshot() -> None:
    users = {}
    for user in get_user_model().objects.order_by("username"):
        sessions = []
        for session in Session.objects.filter(user=user).order_by("created_at", "title"):
            topics = [
                {
                    "uid": str(t.uid),
                    "title": t.title,
                    "summary": t.summary,
                    "keep": t.keep_in_memory,
                    "deprecated": t.deprecated,
                    "active": t.is_active,
                    "notes": list(Notes.objects.filter(topic=t).values_list("content", flat=True)),
                    "messages": list(
                        Message.objects.filter(topic=t)
                        .order_by("seq")
                        .values_list("seq", "role", "content")
                    ),
                }
                for t in Topic.objects.filter(session=session).order_by("uid")
            ]
            sessions.append({"title": session.title, "agent": session.agent.name, "topics": topics})
        facts = [info.data for info in ImportantInfo.objects.filter(user=user).order_by("pk")]
        found = {
            word: len(search_memory(user=user, query=word))
            for word in ("Grenoble", "train", "ünïcödé")
        }
        users[user.username] = {
            "password_ok": user.check_password("pw-" + user.username),
            "token": Token.objects.filter(user=user).exists(),
            "organizations": sorted(user.organizations.values_list("slug", flat=True)),
            "sessions": sessions,
            "facts": facts,
            "search": found,
        }
    print(json.dumps(users, sort_keys=True, ensure_ascii=False, default=str))
