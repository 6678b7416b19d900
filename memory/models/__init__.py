"""The rows of the memory domain, their behaviour and their QuerySets, a module by meaning:

* ``tenancy``        organizations and their agents (who owns what);
* ``conversation``   sessions, topics and their memory state, messages, notes;
* ``facts``          the durable facts and their history;
* ``audit``          the audit trails: memory decisions and deletions;
* ``leases``         locks that expire on their own;
* ``endpoints``      the model endpoints the operator declares;
* ``consolidation``  the runs of the consolidator (what each changed and how to undo it);
* ``preferences``    a user's settings of the chat page (the brain legend seen, the theme).

A new kind of record gets a module of its own beside them. Everything is imported from
here, whatever module defines it: ``from memory.models import Topic``.
"""

from memory.models.audit import Deletion, MemoryDecision
from memory.models.consolidation import ConsolidationRun, ConsolidationRunQuerySet
from memory.models.conversation import (
    IN_MEMORY,
    MemoryState,
    Message,
    MessageQuerySet,
    Notes,
    NotesQuerySet,
    Session,
    SessionQuerySet,
    SessionUnreachable,
    Topic,
    TopicQuerySet,
)
from memory.models.endpoints import ModelEndpoint
from memory.models.facts import FactActor, FactChange, ImportantInfo
from memory.models.leases import Lease
from memory.models.preferences import Preferences
from memory.models.tenancy import (
    DEFAULT_MEMORY_TOKEN_BUDGET,
    Agent,
    AgentQuerySet,
    Organization,
    validate_mcp_server_names,
)

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
    "ModelEndpoint",
    "MemoryState",
    "Message",
    "MessageQuerySet",
    "Notes",
    "NotesQuerySet",
    "Organization",
    "Preferences",
    "Session",
    "SessionQuerySet",
    "SessionUnreachable",
    "Topic",
    "TopicQuerySet",
    "validate_mcp_server_names",
]
