"""The rows of the memory domain, their behaviour and their QuerySets.

A package rather than one ``models.py``, so no file passes the 600-line limit as records
are added: ``core`` holds the conversation and its records (organizations, agents,
sessions, topics, messages, notes, the audit trail, leases, deletions), ``facts`` the
durable facts and their history, ``consolidation`` the runs of the consolidator (what
each changed and how to undo it); a new kind of record gets a module of its own beside
it. Everything is imported from here, whatever module defines it:
``from memory.models import Topic``.
"""

from memory.models.consolidation import ConsolidationRun, ConsolidationRunQuerySet
from memory.models.core import (
    DEFAULT_MEMORY_TOKEN_BUDGET,
    IN_MEMORY,
    Agent,
    AgentQuerySet,
    Deletion,
    Lease,
    MemoryDecision,
    MemoryState,
    Message,
    MessageQuerySet,
    Notes,
    NotesQuerySet,
    Organization,
    Session,
    SessionQuerySet,
    Topic,
    TopicQuerySet,
    validate_mcp_server_names,
)
from memory.models.facts import FactActor, FactChange, ImportantInfo

__all__ = [
    "DEFAULT_MEMORY_TOKEN_BUDGET",
    "IN_MEMORY",
    "Agent",
    "AgentQuerySet",
    "ConsolidationRun",
    "ConsolidationRunQuerySet",
    "Deletion",
    "FactActor",
    "FactChange",
    "ImportantInfo",
    "Lease",
    "MemoryDecision",
    "MemoryState",
    "Message",
    "MessageQuerySet",
    "Notes",
    "NotesQuerySet",
    "Organization",
    "Session",
    "SessionQuerySet",
    "Topic",
    "TopicQuerySet",
    "validate_mcp_server_names",
]
