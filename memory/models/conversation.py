"""The conversation: sessions, their topics (and a topic's memory state), messages, and
each topic's notes.

Invariants the database enforces (not just the code): one active topic per session,
one active notes document per topic, and a message's per-session sequence number is
unique. The durable facts and their history are in ``memory/models/facts.py``.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import IntegrityError, connection, models, router, transaction
from django.db.models import Q, Subquery
from django.utils import timezone

from memory.lib.tool_words import BUILTIN_TOOL_NAMES, RECALLED_TOOL_NAMES, WRITE_ACKNOWLEDGED
from memory.lib.validation import check_title
from memory.models.tenancy import Agent, Organization


class SessionQuerySet(models.QuerySet):
    def owned_by(self, user) -> SessionQuerySet:
        """The sessions the user may reach right now: their own, in an organization they
        still belong to, while their account is active. Every interface (REST, pages, the
        socket and each of its frames, the agent's tools) reads through this one method,
        so leaving an organization or being deactivated ends access at once."""
        if user is None or not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user, user__is_active=True, organization__members=user)

    def start(self, *, user, agent: Agent, title: str = "") -> Session:
        """A new session with its first, active topic."""
        title = check_title(title)
        with transaction.atomic():
            session = self.create(
                user=user, agent=agent, organization_id=agent.organization_id, title=title
            )
            Topic.objects.create(session=session, origin=Topic.Origin.FIRST)
        return session

    def in_scope(self, *, agent_id: int, user_id: int, organization_id: int) -> SessionQuerySet:
        return self.filter(agent_id=agent_id, user_id=user_id, organization_id=organization_id)


class Session(models.Model):
    """One conversation of one user with one agent inside one organization."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_sessions"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="sessions")
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="sessions"
    )
    title = models.CharField(max_length=200, blank=True)
    uid = models.UUIDField(
        default=uuid.uuid4, editable=False, help_text="Stable id across export and import."
    )
    message_count = models.PositiveIntegerField(
        default=0, editable=False, help_text="Messages so far; the next one gets this plus one."
    )
    conversation_count = models.PositiveIntegerField(
        default=0,
        editable=False,
        help_text="Conversation messages stored so far (Message.objects.conversation()): the "
        "10-message heartbeat counts these.",
    )
    drift_result = models.CharField(
        max_length=300, blank=True, help_text="Latest drift verdict, shown in the context stack."
    )
    model_endpoint = models.ForeignKey(
        "memory.ModelEndpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="sessions",
        help_text="The endpoint of the model the user picked for this session (blank: the "
        "agent's). Followed only while the operator lets users pick that model.",
    )
    model_name = models.CharField(
        max_length=200, blank=True, help_text="The model the user picked (blank: the agent's)."
    )
    evaluation_due_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="An evaluation was asked for and has not run yet (the sweep of "
        "memory/actions/scheduling.py enqueues it).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            # Ending with the id: a scope's newest sessions are read from its end (recall's
            # newest topics), not sorted out of all of them.
            models.Index(fields=["agent", "user", "organization", "id"], name="session_scope_idx"),
            models.Index(
                fields=["evaluation_due_at"],
                condition=Q(evaluation_due_at__isnull=False),
                name="session_evaluation_due_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "user", "organization", "uid"], name="session_uid_unique_in_scope"
            )
        ]

    def __str__(self) -> str:
        return self.title or f"Session {self.pk}"

    @property
    def memory_scope_key(self) -> str:
        """The ``agentId:userId:orgId`` scope of persistent memory and durable facts."""
        return f"{self.agent_id}:{self.user_id}:{self.organization_id}"

    @property
    def prompt_cache_key(self) -> str:
        """Identical for every session of one scope, so their stable prefix shares a cache."""
        return f"driftless:{self.memory_scope_key}"

    def active_topic(self) -> Topic:
        return self.topics.get(is_active=True)

    def still_reachable(self) -> bool:
        """Whether its user may still reach it (``Session.objects.owned_by``), asked afresh:
        for work that outlives the request that started it (a turn's rounds and tools)."""
        return Session.objects.owned_by(self.user).filter(pk=self.pk).exists()

    def append_message(
        self, *, topic: Topic | None = None, reachable: bool = False, **fields
    ) -> Message:
        """Add a message at the end of the session, in the active topic by default.

        The session row is locked while the sequence number is taken, so concurrent
        writers (a streaming reply, a tool result, a second tab) never collide. One
        statement takes the number and counts the message as conversation or not (so the
        heartbeat costs the same at any session length); ``self.message_count`` and
        ``self.conversation_count`` are the session's counts once it is stored. The INSERT
        reads the active topic itself: two statements in all.

        ``reachable``: stored only while its user may still reach the session (what
        ``still_reachable`` asks, asked by the statement that counts it, so the check
        costs no round trip of its own); SessionUnreachable, nothing stored, otherwise.
        """
        message = Message(session=self, **fields)
        with transaction.atomic():
            # The UPDATE locks the session row until commit; a fork takes the same lock
            # first, so the active topic the INSERT reads (a statement of its own, so a
            # snapshot taken once the lock is held) cannot change under us.
            self.message_count, self.conversation_count = _count_message(
                self.pk,
                conversation=message.is_conversation,
                owner=self.user if reachable else None,
            )
            message.seq = self.message_count
            if topic is not None:
                message.topic = topic
                message.save(force_insert=True)
            else:
                _insert_in_active_topic(message)
        return message


def _insert_in_active_topic(message: Message) -> None:
    """Insert ``message`` into its session's active topic, read by the INSERT itself, and
    take back its id and topic id (``Model.save`` returns the id only)."""
    meta = Message._meta
    message.topic_id = Subquery(
        Topic.objects.filter(session_id=message.session_id, is_active=True).values("pk")[:1]
    )
    fields = [field for field in meta.local_concrete_fields if field is not meta.pk]
    try:
        [(message.pk, message.topic_id)] = Message._base_manager._insert(
            [message],
            fields=fields,
            returning_fields=[meta.pk, meta.get_field("topic")],
            using=router.db_for_write(Message),
        )
    except IntegrityError as err:
        message.topic_id = None
        if "topic_id" not in str(err) or "null" not in str(err).lower():
            raise
        raise Topic.DoesNotExist(f"session {message.session_id} has no active topic") from err
    message._state.adding = False
    message._state.db = router.db_for_write(Message)


class SessionUnreachable(Exception):
    """The session is gone, or its user may no longer reach it (``owned_by``'s rule):
    nothing was stored."""


def _count_message(session_id: int, *, conversation: bool, owner=None) -> tuple[int, int]:
    """Count one more message (and conversation message) on the session row, returning
    the new counts, in one round trip (PostgreSQL and SQLite 3.35+ both have RETURNING).
    With ``owner`` (the session's user), only while ``Session.objects.owned_by(owner)``
    still finds the session, its rule spelled by that query itself."""
    table, quote = Session._meta.db_table, connection.ops.quote_name
    reachable, reachable_params = "", []
    if owner is not None:
        owned = Session.objects.owned_by(owner).filter(pk=session_id).order_by().values("pk")
        sql, reachable_params = owned.query.sql_with_params()
        reachable = f" AND id IN ({sql})"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(table)} SET message_count = message_count + 1, "
            f"conversation_count = conversation_count + %s, updated_at = %s "
            f"WHERE id = %s{reachable} RETURNING message_count, conversation_count",
            [
                1 if conversation else 0,
                connection.ops.adapt_datetimefield_value(timezone.now()),
                session_id,
                *reachable_params,
            ],
        )
        row = cursor.fetchone()
    if row is None and owner is not None:
        raise SessionUnreachable(f"session {session_id} is gone or out of its user's reach")
    if row is None:
        raise Session.DoesNotExist(f"session {session_id} does not exist")
    return row[0], row[1]


# A topic is "in memory" (in the persistent-memory block) when promoted or deprecated: the
# one spelling of that rule, for queries (``TopicQuerySet.in_memory``, counts) and rows
# (``Topic.in_memory``).
IN_MEMORY = Q(keep_in_memory=True) | Q(deprecated=True)


class MemoryState(models.TextChoices):
    """The tri-state of the brain icon."""

    NONE = "none", "Not in memory (gray)"
    PROMOTED = "promoted", "Promoted (teal)"
    DEPRECATED = "deprecated", "Deprecated (red)"


class TopicQuerySet(models.QuerySet):
    def in_scope(self, *, agent_id: int, user_id: int, organization_id: int) -> TopicQuerySet:
        return self.filter(
            session__agent_id=agent_id,
            session__user_id=user_id,
            session__organization_id=organization_id,
        )

    def in_memory(self) -> TopicQuerySet:
        """Topics that show in persistent memory: promoted or deprecated."""
        return self.filter(IN_MEMORY)

    def owned_by(self, user) -> TopicQuerySet:
        """Topics of the sessions ``Session.objects.owned_by(user)`` finds."""
        return self.filter(session__in=Session.objects.owned_by(user))


class Topic(models.Model):
    class Origin(models.TextChoices):
        FIRST = "first", "First topic of the session"
        USER = "user", "Started by the user"
        DRIFT = "drift", "Drift fork"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="topics")
    uid = models.UUIDField(
        default=uuid.uuid4,
        editable=False,
        db_index=True,
        help_text="Stable id across export and import (unique within a memory scope).",
    )
    title = models.CharField(max_length=200, blank=True)
    summary = models.TextField(blank=True)
    keep_in_memory = models.BooleanField(default=False)
    keep_in_memory_manually_set = models.BooleanField(default=False)
    deprecated = models.BooleanField(default=False)
    deprecated_manually_set = models.BooleanField(default=False)
    memory_changed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the topic last entered persistent memory (FIFO order).",
    )
    memory_suggested = models.BooleanField(
        default=False,
        help_text="Its summary asked to promote it, but it holds results of tools from "
        "outside: it waits for the user to promote it (the brain icon).",
    )
    is_active = models.BooleanField(default=True)
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.FIRST)
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    evaluated_through_seq = models.PositiveIntegerField(
        default=0, help_text="Sequence number of the last message the pipeline evaluated."
    )
    summarized_at = models.DateTimeField(null=True, blank=True)
    summary_is_fallback = models.BooleanField(
        default=False,
        help_text="The summary was built from the first user message because the model failed.",
    )
    summarized_through_seq = models.PositiveIntegerField(
        default=0,
        help_text="Sequence number of the last message the current summary covers "
        "(the next refresh sends only what came after it).",
    )
    summary_manually_set = models.BooleanField(
        default=False,
        help_text="The title and summary are the user's own edit (covering the messages "
        "through summarized_through_seq): a summary of the same messages never overwrites "
        "them.",
    )
    agent_promoted_through_seq = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Set when the agent promoted explicitly: the topic's last message then. "
        "A summary's false demotes it only once the user has written again.",
    )
    consolidated_through_seq = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Set when the consolidator merged this topic into another entry: its last "
        "message then. Its summary does not promote it again until the user writes again.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    embedding = models.BinaryField(
        null=True,
        blank=True,
        editable=False,
        help_text="Sentence vector of the title and summary (memory/text/embeddings.py).",
    )
    embedding_key = models.CharField(
        max_length=16,
        blank=True,
        editable=False,
        help_text="Digest of the text the embedding is of: another text computes it again.",
    )

    objects = TopicQuerySet.as_manager()

    class Meta:
        ordering = ["session", "created_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(is_active=True),
                name="one_active_topic_per_session",
            )
        ]
        indexes = [
            models.Index(
                fields=["session", "memory_changed_at"],
                condition=IN_MEMORY,
                name="topic_in_memory_idx",
            )
        ]

    def __str__(self) -> str:
        return self.title or f"Topic {self.pk}"

    @property
    def memory_state(self) -> MemoryState:
        if self.deprecated:
            return MemoryState.DEPRECATED
        if self.keep_in_memory:
            return MemoryState.PROMOTED
        return MemoryState.NONE

    @property
    def in_memory(self) -> bool:
        """The row-level twin of ``IN_MEMORY``: shown in persistent memory."""
        return self.keep_in_memory or self.deprecated

    @property
    def user_took_position(self) -> bool:
        """The user has set keep-in-memory or deprecated themselves (the guard's test)."""
        return self.keep_in_memory_manually_set or self.deprecated_manually_set

    def last_seq(self) -> int:
        """The sequence number of the topic's last message (0 when it has none)."""
        return self.messages.aggregate(last=models.Max("seq"))["last"] or 0

    def has_user_message_after(self, seq: int) -> bool:
        return self.messages.filter(role=Message.Role.USER, seq__gt=seq).exists()

    def has_message_after(self, seq: int) -> bool:
        return self.messages.exclude(role=Message.Role.ERROR).filter(seq__gt=seq).exists()

    @property
    def edit_stands(self) -> bool:
        """The user's edit is the topic's text until the topic receives a new message."""
        return self.summary_manually_set and not self.has_message_after(self.summarized_through_seq)


class MessageQuerySet(models.QuerySet):
    def with_place(self) -> MessageQuerySet:
        """With their topic and session, as recall ranks them, without the columns it
        never reads: a turn's recall loads a few hundred rows, and each would decode the
        JSON of its tool calls, memory record and versions (issue 43)."""
        return self.select_related("topic", "session").defer(
            "tool_calls", "memory_trace", "versions", "topic__embedding", "session__drift_result"
        )

    def conversation(self) -> MessageQuerySet:
        """The user's messages and the assistant's text replies: what the spec's "messages"
        count (the 10-message heartbeat, ``MIN_MEMORY_TURNS``). Tool results, the assistant's
        tool-call requests and error records are not conversation."""
        return self.filter(
            Q(role=Message.Role.USER) | Q(role=Message.Role.ASSISTANT, tool_calls=[])
        )

    def outside_tool_results(self) -> MessageQuerySet:
        """Tool results that are outside text (memory/lib/tool_words.is_outside_text): every
        MCP result, and what recall and a notes read brought back."""
        recalled = Q(tool_name__in=RECALLED_TOOL_NAMES) & ~Q(content__startswith=WRITE_ACKNOWLEDGED)
        return self.filter(role=Message.Role.TOOL).filter(
            ~Q(tool_name__in=BUILTIN_TOOL_NAMES) | recalled
        )


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"
        TOOL = "tool", "Tool result"
        ERROR = "error", "Error record (never sent to the model)"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField(help_text="Per-session order; never changes.")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(
        default=list, blank=True, help_text="OpenAI-style tool calls of an assistant message."
    )
    tool_call_id = models.CharField(max_length=200, blank=True)
    tool_name = models.CharField(max_length=200, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    stopped = models.BooleanField(
        default=False, help_text="A reply the user stopped: what had streamed until then."
    )
    embedding = models.BinaryField(
        null=True,
        blank=True,
        editable=False,
        help_text="Sentence vector of the content (memory/text/embeddings.py), once.",
    )
    memory_trace = models.JSONField(
        default=dict,
        blank=True,
        help_text="A reply's record of memory: what its request carried (memory entries, "
        "facts, notes, recalled passages: kinds and ids) and what its turn changed "
        "(memory/actions/memory_trace.py).",
    )
    recalled = models.TextField(
        blank=True,
        help_text="A reply's recalled block: the passages from earlier conversations its "
        "request carried right before the user's message it answers. Later requests keep it "
        "in that place while that message is in the window, so each extends the one before "
        "it (memory/actions/context.py).",
    )
    versions = models.JSONField(
        default=list,
        blank=True,
        help_text="The earlier versions of this message, oldest first: replies replaced by "
        "Regenerate, questions replaced by Edit ({content, created_at}). Never sent to the "
        "model: only this message, the latest version, is in the context.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_seq_unique_in_session")
        ]
        indexes = [models.Index(fields=["topic", "-seq"], name="message_topic_trailing_idx")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.role}"

    @property
    def is_reply(self) -> bool:
        """The assistant's words: a message of the assistant that calls no tool."""
        return self.role == self.Role.ASSISTANT and not self.tool_calls

    # Two rules of "a conversation message", for two uses, on purpose:
    #
    # * ``is_conversation`` counts the conversation (``Session.conversation_count``, the
    #   spec's turns for MIN_MEMORY_TURNS and the drift interval): a test on role and tool
    #   calls only, so ``MessageQuerySet.conversation()`` says the same in SQL and the
    #   counter on the session row never disagrees with a count of the rows.
    # * ``has_dialogue_text`` is what drift detection reads (memory/actions/fork.py): the
    #   words said, so an assistant message that also calls a tool counts when it says
    #   something, and an empty one does not (there is nothing to compare).

    @property
    def is_conversation(self) -> bool:
        """The row-level twin of ``MessageQuerySet.conversation()``: the user's messages
        and the assistant's replies (no tool call), whatever their text."""
        return self.role == self.Role.USER or self.is_reply

    @property
    def has_dialogue_text(self) -> bool:
        """Words of the dialogue, as drift detection reads them: the user's message, or the
        assistant's with text (tool calls or not)."""
        if self.role == self.Role.USER:
            return True
        return self.role == self.Role.ASSISTANT and bool(self.content.strip())


class NotesQuerySet(models.QuerySet):
    def active(self) -> NotesQuerySet:
        return self.filter(archived=False)

    def archive(self) -> int:
        """Take documents out of the context; they stay on disk for traceability."""
        return self.filter(archived=False).update(archived=True, archived_at=timezone.now())


class Notes(models.Model):
    """A topic's scratchpad. Archived documents are kept but never injected."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="notes")
    content = models.TextField(blank=True)
    archived = models.BooleanField(default=False)
    archived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = NotesQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "notes"
        ordering = ["topic", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["topic"],
                condition=Q(archived=False),
                name="one_active_notes_per_topic",
            )
        ]

    def __str__(self) -> str:
        return f"Notes of {self.topic}" + (" (archived)" if self.archived else "")
