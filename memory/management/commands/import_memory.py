"""Merge a memory document into one scope: all of it, or nothing."""

import json

from django.core.management.base import BaseCommand, CommandError

from memory.actions.portability import ImportRefused, import_memory
from memory.management.scope import scope_arguments, scope_from_options


class Command(BaseCommand):
    help = "Import a memory document (docs/memory-export.md) into one user and agent."

    def add_arguments(self, parser):
        scope_arguments(parser)
        parser.add_argument("file", help="the JSON document ('-' for standard input)")

    def handle(self, *args, file: str, **options):
        user, agent = scope_from_options(options)
        try:
            if file == "-":
                document = json.load(self.stdin)
            else:
                with open(file, encoding="utf-8") as handle:
                    document = json.load(handle)
        except (OSError, ValueError) as err:
            raise CommandError(f"cannot read {file}: {err}") from err
        try:
            report = import_memory(user=user, agent=agent, document=document)
        except ImportRefused as err:
            raise CommandError(f"nothing was imported: {err}") from err
        self.stdout.write(
            f"Imported {report.facts} facts; created {report.sessions_created} sessions, "
            f"{report.topics_created} topics and {report.messages_created} messages; "
            f"updated {report.topics_updated} topics."
        )
