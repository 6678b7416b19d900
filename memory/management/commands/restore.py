"""Replace the installation's data with a backup's (memory/management/backup.py)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from memory.management.backup import BackupError, restore_backup


class Command(BaseCommand):
    help = "Replace ALL of this installation's data with a backup made by manage.py backup."

    def add_arguments(self, parser):
        parser.add_argument("file", help="the backup file")
        parser.add_argument(
            "--yes", action="store_true", help="do not ask: this database is emptied first"
        )

    def handle(self, *args, file: str, yes: bool, **options):
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        if not yes:
            answer = input(
                "This empties this installation's database and loads the backup. Continue? [y/N] "
            )
            if answer.strip().lower() not in {"y", "yes"}:
                raise CommandError("nothing changed")
        try:
            meta = restore_backup(path)
        except BackupError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"Restored the backup of {meta['created']} ({meta['engine']}).")
