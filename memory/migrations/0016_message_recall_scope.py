"""Recall bounded by the scope, not the table (memory/stores/recall/query.py): each message
keeps its session's user (``recall_user_id``, set by a trigger, so every way a message is
written keeps it), and two indexes start with it: a btree (user, id), the user's newest
messages in one range, and a GIN (user, search_vector) through ``btree_gin``, a word's
matches among that user's messages only. PostgreSQL only: SQLite recalls through FTS5."""

from django.db import migrations

FORWARD = (
    "CREATE EXTENSION IF NOT EXISTS btree_gin",
    "ALTER TABLE memory_message ADD COLUMN IF NOT EXISTS recall_user_id bigint",
    """CREATE OR REPLACE FUNCTION memory_message_recall_user() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        NEW.recall_user_id := (SELECT user_id FROM memory_session WHERE id = NEW.session_id);
        RETURN NEW;
    END $$""",
    "DROP TRIGGER IF EXISTS memory_message_recall_user ON memory_message",
    "CREATE TRIGGER memory_message_recall_user BEFORE INSERT OR UPDATE OF session_id "
    "ON memory_message FOR EACH ROW EXECUTE FUNCTION memory_message_recall_user()",
    "UPDATE memory_message AS m SET recall_user_id = s.user_id FROM memory_session AS s "
    "WHERE s.id = m.session_id AND m.recall_user_id IS DISTINCT FROM s.user_id",
    "CREATE INDEX IF NOT EXISTS message_recall_recent ON memory_message (recall_user_id, id)",
    "CREATE INDEX IF NOT EXISTS message_recall_search ON memory_message "
    "USING gin (recall_user_id, search_vector)",
)
BACKWARD = (
    "DROP INDEX IF EXISTS message_recall_search",
    "DROP INDEX IF EXISTS message_recall_recent",
    "DROP TRIGGER IF EXISTS memory_message_recall_user ON memory_message",
    "DROP FUNCTION IF EXISTS memory_message_recall_user()",
    "ALTER TABLE memory_message DROP COLUMN IF EXISTS recall_user_id",
)


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for statement in statements:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("memory", "0015_consolidation_facts")]

    operations = [migrations.RunPython(_run(FORWARD), _run(BACKWARD))]
