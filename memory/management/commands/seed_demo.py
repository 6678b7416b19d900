"""Create a demo organization, agent and user, idempotently, and say how to log in."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from memory.models import Agent, Organization

DEMO_SOUL = (
    "You are Drift, a thoughtful assistant with a long memory. You keep track of what the "
    "user decided and prefers, say so when you rely on something you remembered, and keep "
    "answers short unless asked for depth."
)
DEMO_SKILLS = (
    "Planning and decisions; writing and editing; explaining technical topics; keeping "
    "durable facts with important_info and working notes with notes."
)


class Command(BaseCommand):
    help = "Create (or refresh) the demo organization, agent and user."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo-password")

    def handle(self, *args, username: str, password: str, **options):
        organization, _ = Organization.objects.get_or_create(
            slug="demo", defaults={"name": "Demo organization"}
        )
        Agent.objects.get_or_create(
            organization=organization,
            name="Drift",
            defaults={"soul": DEMO_SOUL, "skills": DEMO_SKILLS},
        )
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(password)
            user.save()
        organization.members.add(user)
        verb = "Created" if created else "Kept"
        self.stdout.write(
            f"{verb} the demo user. Log in at http://127.0.0.1:8000/ "
            f"(admin: http://127.0.0.1:8000/admin/) as {username!r}"
            + (f" with password {password!r}." if created else " with the password you set.")
        )
