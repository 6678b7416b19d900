"""Context assembly costs a constant number of queries, whatever the history size."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.actions.context import assemble_context
from memory.models import Message, Notes, Session
from memory.stores.facts import set_fact
from memory.stores.notes import append_notes
from memory.stores.persistent import invalidate_persistent_memory
from tests.memory_builders import add_messages, add_tool_round, add_topic

# topics (with the active one's notes, the facts and the drift result; the session and its
# agent are the caller's), window (its rows with the topic's count), memory (miss), and
# recall's for the latest message (memory/stores/recall/query.py): its statement timeout,
# the messages with their topics and sessions (one statement, whatever the words), the
# topics and the notes (one statement on PostgreSQL), the exchanges of its hits; recall by meaning
# (memory/stores/recall/vectors.py): the scope's latest topics, the nearest ones' messages'
# vectors (with what a hit shows of them: the messages found are built from those rows);
# and, inside a test's transaction, a savepoint, its release and the timeout set back
MAX_QUERIES = 13


def count_queries(session) -> tuple[int, int]:
    """Queries of a cold assembly (memory cache empty), then of a warm one."""
    invalidate_persistent_memory(session.memory_scope_key)
    counts = []
    for _ in range(2):
        with CaptureQueriesContext(connection) as captured:
            assemble_context(session=session)
        counts.append(len(captured.captured_queries))
    return counts[0], counts[1]


def grow_history(session, *, topics: int, messages: int) -> None:
    """``topics`` topics over several sessions of the scope (a share of them promoted or
    deprecated, with summaries and archived notes) and ``messages`` messages in all,
    a quarter of them in this session's active topic, tool rounds included."""
    sessions = [session] + [
        Session.objects.start(user=session.user, agent=session.agent) for _ in range(9)
    ]
    per_topic = -(-(messages * 3 // 4) // topics)  # rounded up
    for index in range(topics):
        owner = sessions[index % len(sessions)]
        topic = add_topic(
            owner,
            title=f"Topic {index}",
            summary=f"Summary of topic {index}: decisions and context.",
            keep=index % 5 == 0,
            deprecated=index % 17 == 0,
            age_days=index,
        )
        add_messages(owner, per_topic, topic=topic)
        append_notes(topic=topic, text=f"notes {index}")
        Notes.objects.filter(topic=topic).archive()
    active = session.active_topic()
    while Message.objects.filter(topic=active).count() < messages // 4:
        add_messages(session, 45, topic=active)
        add_tool_round(session, ["notes", "important_info"], tag=f"{session.message_count}-")
    append_notes(topic=active, text="working notes")
    for key in range(20):
        set_fact(user=session.user, agent=session.agent, key=f"fact {key}", value=key, actor="user")


def test_assembly_runs_the_same_number_of_queries_at_10_and_at_2000_messages(
    session, django_assert_max_num_queries
):
    session.agent.memory_token_budget = 200  # the agent assembly reads: the session's own
    session.agent.save(update_fields=["memory_token_budget"])
    earlier = add_topic(session, title="Earlier", summary="An earlier subject.")
    add_messages(session, 4, topic=earlier)  # one past topic: recall has something to rank
    add_messages(session, 10)
    small_cold, small_warm = count_queries(session)

    grow_history(session, topics=200, messages=2000)
    assert Message.objects.filter(session__user=session.user).count() >= 2000
    large_cold, large_warm = count_queries(session)

    assert (large_cold, large_warm) == (small_cold, small_warm)
    assert small_cold <= MAX_QUERIES and small_warm == small_cold - 1
    with django_assert_max_num_queries(small_warm):
        stack = assemble_context(session=session)
    assert len([m for m in stack.messages if m["role"] != "system"]) <= 20
    assert stack.dropped  # the budget was exercised too
