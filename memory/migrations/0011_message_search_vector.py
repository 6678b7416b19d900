"""Messages keep their tsvector (a stored generated column with a GIN index), so a search
reads it instead of parsing every matching message again (memory/stores/search.py); the
expression index it replaces is dropped. PostgreSQL only: SQLite searches through FTS5."""

from django.db import migrations

FORWARD = (
    "ALTER TABLE memory_message ADD COLUMN IF NOT EXISTS search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple', coalesce(content, ''))) STORED",
    "CREATE INDEX IF NOT EXISTS message_search_vector ON memory_message USING gin (search_vector)",
    "DROP INDEX IF EXISTS message_content_search",
)
BACKWARD = (
    "DROP INDEX IF EXISTS message_search_vector",
    "ALTER TABLE memory_message DROP COLUMN IF EXISTS search_vector",
)


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for statement in statements:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("memory", "0010_consolidation")]

    operations = [migrations.RunPython(_run(FORWARD), _run(BACKWARD))]
