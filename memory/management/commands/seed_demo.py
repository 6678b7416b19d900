"""Create a demo organization, agent and user, idempotently, and say how to log in."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from memory.llm import get_chat_model
from memory.models import Agent, Organization

DEMO_SOUL = (
    "You are Drift, a thoughtful assistant with a long memory. You keep track of what the "
    "user decided and prefers, say so when you rely on something you remembered, and keep "
    "answers short unless asked for depth."
)
DEMO_SKILLS = (
    "Planning and decisions; writing and editing; explaining technical topics; remembering "
    "durable facts about you and keeping working notes for each topic."
)


# What earlier versions gave the demo agent: refreshed to DEMO_SKILLS, unless edited since.
PREVIOUS_DEMO_SKILLS = (
    "Planning and decisions; writing and editing; explaining technical topics; keeping "
    "durable facts with important_info and working notes with notes."
)
DEFAULT_URL = "http://127.0.0.1:8000/"
WILDCARD_HOSTS = {"0.0.0.0", "::", "[::]"}


def site_url(host: str, port: str) -> str:
    """The address a browser on this machine opens for a server bound to host:port."""
    shown = "127.0.0.1" if host in WILDCARD_HOSTS else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


class Command(BaseCommand):
    help = "Create (or refresh) the demo organization, agent and user, and say how to log in."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo-password")
        parser.add_argument(
            "--host", default="", help="the address the server listens on (make run: HOST)"
        )
        parser.add_argument("--port", default="", help="the port it listens on (make run: PORT)")
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="set the demo user's password back to --password",
        )

    def handle(self, *args, username: str, password: str, host: str, port: str, **options):
        organization, _ = Organization.objects.get_or_create(
            slug="demo", defaults={"name": "Demo organization"}
        )
        Agent.objects.get_or_create(
            organization=organization,
            name="Drift",
            defaults={"soul": DEMO_SOUL, "skills": DEMO_SKILLS},
        )
        Agent.objects.filter(
            organization=organization, name="Drift", skills=PREVIOUS_DEMO_SKILLS
        ).update(skills=DEMO_SKILLS)
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created or options["reset_password"]:
            user.set_password(password)
            user.save()
        organization.members.add(user)
        url = site_url(host or "127.0.0.1", port or "8000") if (host or port) else DEFAULT_URL
        self.stdout.write(self._banner(url, user, username, password, created=created))

    def _banner(self, url: str, user, username: str, password: str, *, created: bool) -> str:
        lines = [
            f"{'Created' if created else 'Kept'} the demo user.",
            f"  Open      {url}",
            f"  Admin     {url}admin/ (the demo user is a superuser)",
            f"  Username  {username}",
        ]
        if user.check_password(password):
            lines.append(f"  Password  {password}")
        else:
            lines.append(
                f"  Password  changed since it was created; to set it back to {password!r}:"
            )
            lines.append(
                "            .venv/bin/python manage.py seed_demo --reset-password"
                + ("" if username == "demo" else f" --username {username}")
            )
        lines.append(_model_line())
        return "\n".join(lines)


def _model_line() -> str:
    """Which model answers: the banner says so, as the chat page does."""
    model = get_chat_model("chat")
    if model.offline:
        local = "" if settings.LOCAL_MODEL == "off" else "; make run prepares a local one now"
        return (
            "  Model     offline (no model connected): set OPENAI_API_KEY, or OPENAI_BASE_URL "
            f"for a local server (make local-model builds one){local}"
        )
    return f"  Model     {model.name}"
