"""The --username and --agent options the memory commands share."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from memory.models import Agent


def scope_arguments(parser) -> None:
    parser.add_argument("--username", required=True)
    parser.add_argument("--agent", required=True, type=int, help="the agent's id")


def scope_from_options(options: dict):
    """The user and one of their agents, or CommandError saying which is missing."""
    user = get_user_model().objects.filter(username=options["username"]).first()
    if user is None:
        raise CommandError(f"no user named {options['username']!r}")
    agent = Agent.objects.usable_by(user).filter(pk=options["agent"]).first()
    if agent is None:
        raise CommandError(
            f"{user} has no agent {options['agent']} (not a member of its organization?)"
        )
    return user, agent
