"""Dates an import stored past year 9999 (``9999-12-31T23:59:59-14:00`` is year 10000 in
UTC) cannot be read back by Python: every page listing the row answered 500. Imports now
refuse them (memory/actions/portability.py); the rows already stored get the time of this
migration instead. PostgreSQL only: SQLite stores the text as it was given."""

from django.db import migrations

COLUMNS = {
    "memory_session": ("created_at", "updated_at"),
    "memory_topic": ("created_at", "closed_at", "summarized_at", "memory_changed_at"),
    "memory_message": ("created_at",),
}


def repair(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, columns in COLUMNS.items():
        for column in columns:
            schema_editor.execute(
                f"UPDATE {table} SET {column} = now() WHERE {column} >= '10000-01-01T00:00:00Z'"
                f" OR {column} < '0001-01-02T00:00:00Z'"
            )


class Migration(migrations.Migration):
    dependencies = [("memory", "0011_message_search_vector")]

    operations = [migrations.RunPython(repair, migrations.RunPython.noop)]
