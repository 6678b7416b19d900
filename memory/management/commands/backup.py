"""Write the whole installation's data to one file (memory/management/backup.py)."""

from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from memory.management.backup import write_backup


class Command(BaseCommand):
    help = "Write every user's data (memory, facts, topics, messages, accounts) to one file."

    def add_arguments(self, parser):
        parser.add_argument(
            "--output",
            help="the file to write (default: var/backups/driftless-<UTC time>.tar)",
        )

    def handle(self, *args, output: str | None, **options):
        if output:
            path = Path(output)
        else:
            stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
            path = Path(settings.VAR_DIR) / "backups" / f"driftless-{stamp}.tar"
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = write_backup(path)
        size = path.stat().st_size
        self.stdout.write(f"Backed up ({meta['engine']}, {size:,} bytes) to {path}")
        self.stdout.write(f"Restore it with: make restore FILE={path}")
