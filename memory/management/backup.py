"""The whole installation's data in one file, and back (``manage.py backup`` / ``restore``,
``make backup`` / ``make restore FILE=...``).

A backup is a tar file holding ``meta.json`` (format, date, database engine, the applied
migrations) and ``data.json.gz``: Django's ``dumpdata`` of every app with natural keys, so
it restores on any database engine (SQLite to PostgreSQL and back) whose schema the same
migrations made. Content types and permissions are left out: ``migrate`` creates them,
and what refers to them does so by natural key. Login sessions are left out too (everyone
signs in again); API tokens, users, organizations, agents, sessions of conversation,
topics, messages, notes, facts, memory and the audit trail are all in.

Restoring empties the database first (``flush``), then loads the file in one transaction:
the installation is afterwards exactly the backup's. A backup made by code that knows
migrations this code does not is refused (upgrade the code first, then restore).
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from django.core.management import call_command
from django.db import connection, transaction
from django.db.migrations.recorder import MigrationRecorder

FORMAT = "driftless-backup"
VERSION = 1
EXCLUDED = ["contenttypes", "auth.permission", "sessions", "admin.logentry"]


class BackupError(Exception):
    """A backup file that cannot be restored here, said in a sentence."""


def applied_migrations() -> dict[str, list[str]]:
    applied: dict[str, list[str]] = {}
    for app, name in MigrationRecorder(connection).applied_migrations():
        applied.setdefault(app, []).append(name)
    return {app: sorted(names) for app, names in sorted(applied.items())}


def write_backup(path: Path) -> dict:
    """Write the installation's data to ``path``; return its meta data."""
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "engine": connection.vendor,
        "migrations": applied_migrations(),
    }
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "data.json.gz"
        call_command(
            "dumpdata",
            natural_foreign=True,
            natural_primary=True,
            exclude=EXCLUDED,
            output=str(data),
            verbosity=0,
        )
        partial = path.with_name(path.name + ".partial")
        with tarfile.open(partial, "w") as archive:
            encoded = json.dumps(meta, indent=2).encode()
            info = tarfile.TarInfo("meta.json")
            info.size = len(encoded)
            archive.addfile(info, io.BytesIO(encoded))
            archive.add(data, arcname="data.json.gz")
        partial.replace(path)
    return meta


def read_meta(archive: tarfile.TarFile) -> dict:
    try:
        meta = json.load(archive.extractfile("meta.json"))
    except (KeyError, ValueError, AttributeError) as error:
        raise BackupError("this is not a Driftless backup (no readable meta.json)") from error
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise BackupError(f"this is not a Driftless backup of version {VERSION}")
    here = applied_migrations()
    unknown = [
        f"{app}.{name}"
        for app, names in meta.get("migrations", {}).items()
        for name in names
        if name not in here.get(app, [])
    ]
    if unknown:
        raise BackupError(
            f"the backup was made by a newer Driftless (migrations {', '.join(unknown[:3])} "
            "are not applied here): update the code and run migrate, then restore"
        )
    return meta


def restore_backup(path: Path) -> dict:
    """Replace the installation's data with the backup's; return its meta data."""
    try:
        archive = tarfile.open(path, "r")
    except (OSError, tarfile.TarError) as error:
        raise BackupError(f"{path} cannot be read as a backup: {error}") from error
    with archive, tempfile.TemporaryDirectory() as scratch:
        meta = read_meta(archive)
        data = Path(scratch) / "data.json.gz"
        member = archive.extractfile("data.json.gz")
        if member is None:
            raise BackupError("the backup holds no data.json.gz")
        with open(data, "wb") as out:
            while chunk := member.read(1 << 20):
                out.write(chunk)
        with transaction.atomic():
            call_command("flush", interactive=False, verbosity=0)
            call_command("loaddata", str(data), verbosity=0)
    return meta
