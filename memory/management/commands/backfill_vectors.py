"""Store the sentence vectors that history written before vectors existed lacks."""

from django.core.management.base import BaseCommand, CommandError

from memory.actions.backfill import BACKFILL_BATCH, do_backfill_vectors


class Command(BaseCommand):
    help = (
        "Compute and store the missing sentence vectors of messages and topics, in batches "
        "(idempotent: run it again to go on after a stop; --limit bounds one run)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=BACKFILL_BATCH)
        parser.add_argument("--limit", type=int, help="stop after storing this many vectors")

    def handle(self, *args, batch_size: int, limit: int | None, **options):
        try:
            report = do_backfill_vectors(batch_size=batch_size, limit=limit)
        except ValueError as error:
            raise CommandError(str(error)) from error
        state = "done" if report.done else "stopped at the limit: run it again to go on"
        self.stdout.write(
            f"stored {report.messages} message and {report.topics} topic vectors ({state})"
        )
