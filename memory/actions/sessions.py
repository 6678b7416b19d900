"""A session's own rows: starting one, renaming it, picking the model it answers with.

The session's open sockets hear of a rename (``session.updated``), after the commit.
Callers check ownership and the title first (REST looks the session up through the
caller's own; chat/api/serializers.py checks the title).

A session's model: the agent's (``AGENT_MODEL``, the choice ""), or one the operator lets
users pick (``ModelEndpoint.user_models``, the choice ``"<endpoint id>:<model>"``). The
next turn answers with it (memory/llm get_chat_model(session=...)); a pick the operator
later withdraws falls back to the agent's model.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from memory.events import publish_on_commit, session_updated
from memory.lib.errors import InvalidInput
from memory.llm import session_pick
from memory.models import Agent, ModelEndpoint, Session

AGENT_MODEL = ""


@dataclass(frozen=True)
class ModelChoice:
    id: str  # AGENT_MODEL, or "<endpoint id>:<model>"
    label: str


def model_choices(*, agent_model: str) -> list[ModelChoice]:
    """What a user may pick for a session: the agent's model (named ``agent_model``), then
    every model the operator lets users pick, endpoint by endpoint."""
    choices = [ModelChoice(AGENT_MODEL, f"{agent_model} (the agent's)")]
    for endpoint in ModelEndpoint.objects.pickable():
        choices += [
            ModelChoice(f"{endpoint.pk}:{name}", f"{name} ({endpoint.name})")
            for name in endpoint.user_models
        ]
    return choices


def session_choice(session: Session) -> str:
    """The session's current choice (AGENT_MODEL when it follows the agent's)."""
    pick = session_pick(session)
    return AGENT_MODEL if pick is None else f"{pick[0].pk}:{pick[1]}"


def do_start_session(*, user, agent: Agent, title: str = "") -> Session:
    """A new session with its first, active topic (no socket listens to it yet)."""
    return Session.objects.start(user=user, agent=agent, title=title)


def do_rename_session(*, session: Session, title: str) -> None:
    """Give the session ``title`` (empty: it shows its main topic's title again)."""
    with transaction.atomic():
        Session.objects.filter(pk=session.pk).update(title=title)
        publish_on_commit(session.pk, session_updated(session_id=session.pk, title=title))


def do_choose_session_model(*, session: Session, choice: str) -> None:
    """Answer the session's next turns with ``choice`` (see the module); a model the
    operator does not let users pick is refused, and the session keeps its model."""
    endpoint, name = None, ""
    if choice != AGENT_MODEL:
        pk, _, name = choice.partition(":")
        known = pk.isdecimal() and len(pk) <= 9  # an id, never a number the database refuses
        endpoint = ModelEndpoint.objects.filter(pk=int(pk)).first() if known else None
        if endpoint is None or name not in endpoint.user_models:
            raise InvalidInput(
                f"{choice!r} is not a model you may pick: choose one the page lists (the "
                "operator decides which); this session keeps its model.",
                field="choice",
                code="model_not_allowed",
            )
    Session.objects.filter(pk=session.pk).update(model_endpoint=endpoint, model_name=name)
    session.model_endpoint, session.model_name = endpoint, name
