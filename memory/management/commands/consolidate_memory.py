"""Consolidate one scope's persistent memory now, or undo a run."""

from django.core.management.base import BaseCommand, CommandError

from memory.actions.consolidation import do_consolidate, do_undo_consolidation
from memory.lib.errors import Refused
from memory.management.scope import scope_arguments, scope_from_options
from memory.models import ConsolidationRun


class Command(BaseCommand):
    help = (
        "Consolidate the memory of one user and agent (merge duplicates, supersede reversed "
        "decisions; the user's curated entries are never changed), or undo a run with --undo."
    )

    def add_arguments(self, parser):
        scope_arguments(parser)
        parser.add_argument("--undo", type=int, help="the id of a run of this scope to undo")

    def handle(self, *args, undo: int | None, **options):
        user, agent = scope_from_options(options)
        if undo is not None:
            run = ConsolidationRun.objects.filter(pk=undo, user=user, agent=agent).first()
            if run is None:
                raise CommandError(f"no consolidation run {undo} of {user} with {agent}")
            try:
                run = do_undo_consolidation(run=run, user=user)
            except Refused as refused:
                raise CommandError(refused.message) from refused
        else:
            trigger = ConsolidationRun.Trigger.COMMAND
            run = do_consolidate(agent=agent, user=user, trigger=trigger)
        self.stdout.write(
            f"run {run.pk}: {run.status} ({len(run.applied)} applied, {len(run.refused)} "
            f"refused){': ' + run.detail if run.detail else ''}"
        )
