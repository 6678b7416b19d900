"""Notes: one active document per topic; $set appends, update replaces, archive hides."""

import pytest

from memory.lib.limits import MAX_NOTES_CHARS
from memory.models import Notes
from memory.stores.notes import (
    NotesError,
    append_notes,
    read_latest_notes,
    read_notes,
    replace_notes,
)


@pytest.fixture
def topic(session):
    return session.active_topic()


def test_append_logs_entries_in_order_and_never_overwrites(topic):
    assert read_notes(topic_id=topic.pk) == ""
    append_notes(topic=topic, text="Chose Postgres.")
    content = append_notes(topic=topic, text="  Then Redis for the cache.\n")
    assert content == "Chose Postgres.\nThen Redis for the cache."
    assert read_notes(topic_id=topic.pk) == content
    assert Notes.objects.filter(topic=topic).count() == 1


def test_replace_rewrites_the_whole_document(topic):
    append_notes(topic=topic, text="Chose MySQL.")
    append_notes(topic=topic, text="Hmm.")
    assert replace_notes(topic=topic, content="Chose Postgres (MySQL dropped).") == (
        "Chose Postgres (MySQL dropped)."
    )
    assert read_notes(topic_id=topic.pk) == "Chose Postgres (MySQL dropped)."
    assert replace_notes(topic=topic, content="") == ""


def test_archived_notes_are_kept_but_not_read_as_the_active_ones(topic):
    append_notes(topic=topic, text="first scratch")
    Notes.objects.filter(topic=topic).archive()
    assert read_notes(topic_id=topic.pk) == ""
    assert read_latest_notes(topic=topic) == ("first scratch", True)
    append_notes(topic=topic, text="second scratch")
    assert read_notes(topic_id=topic.pk) == "second scratch"
    assert read_latest_notes(topic=topic) == ("second scratch", False)
    assert Notes.objects.filter(topic=topic).count() == 2


@pytest.mark.parametrize("text", ["", "   ", None, 7])
def test_an_empty_or_non_text_entry_is_refused(topic, text):
    with pytest.raises(NotesError):
        append_notes(topic=topic, text=text)
    assert not Notes.objects.exists()


def test_notes_cannot_grow_past_the_cap(topic):
    append_notes(topic=topic, text="x" * (MAX_NOTES_CHARS - 10))
    with pytest.raises(NotesError, match="condensed"):
        append_notes(topic=topic, text="y" * 20)
    with pytest.raises(NotesError):
        replace_notes(topic=topic, content="z" * (MAX_NOTES_CHARS + 1))
    assert read_notes(topic_id=topic.pk) == "x" * (MAX_NOTES_CHARS - 10)
