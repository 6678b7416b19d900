"""Write one scope's memory document (facts, memory topics, optionally whole sessions)."""

import json

from django.core.management.base import BaseCommand

from memory.actions.portability import export_memory
from memory.management.scope import scope_arguments, scope_from_options


class Command(BaseCommand):
    help = "Export the memory of one user and agent as JSON (docs/memory-export.md)."

    def add_arguments(self, parser):
        scope_arguments(parser)
        parser.add_argument("--sessions", action="store_true", help="include whole sessions")
        parser.add_argument("--output", help="a file to write (default: standard output)")

    def handle(self, *args, sessions: bool, output: str | None, **options):
        user, agent = scope_from_options(options)
        text = json.dumps(
            export_memory(user=user, agent=agent, include_sessions=sessions),
            ensure_ascii=False,
            indent=2,
        )
        if output:
            with open(output, "w", encoding="utf-8") as file:
                file.write(text + "\n")
        else:
            self.stdout.write(text)
