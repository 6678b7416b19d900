"""``manage.py event_schema``: write docs/websocket-events.schema.json from memory/events.py.

The schema is generated, never edited by hand: ``make schema`` runs this after a change to
an event's type, and ``--check`` (tests/test_event_shapes.py does the same) fails when the
committed file differs from the types.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from memory.events import events_json_schema

SCHEMA_PATH = Path(settings.BASE_DIR) / "docs" / "websocket-events.schema.json"


def rendered_schema() -> str:
    return json.dumps(events_json_schema(), indent=2, ensure_ascii=False) + "\n"


class Command(BaseCommand):
    help = "Write docs/websocket-events.schema.json from the event types (--check: compare)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--check", action="store_true", help="fail when the file is stale")

    def handle(self, *args, check: bool = False, **options) -> None:
        text = rendered_schema()
        if check:
            if not SCHEMA_PATH.exists() or SCHEMA_PATH.read_text() != text:
                raise CommandError(f"{SCHEMA_PATH} is stale: run make schema")
            self.stdout.write(f"{SCHEMA_PATH.name} matches memory/events.py")
            return
        SCHEMA_PATH.write_text(text)
        self.stdout.write(f"wrote {SCHEMA_PATH}")
