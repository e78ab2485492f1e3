"""sessionstore: a DynamoDB session store for MCP servers.

Optimistic locking with a version attribute, conditional writes, atomic context accumulation,
idempotent tool-call records and a lifecycle state machine -- each write one request, an
append two.
"""

from .client import connect
from .clock import Clock, ManualClock, SystemClock, format_timestamp
from .codec import JSON
from .errors import (
    ConflictRetriesExhausted,
    ContextFull,
    DynamoDBError,
    InvalidInput,
    InvalidTransition,
    ItemOverLimit,
    ItemTooLarge,
    RequestOverLimit,
    SessionAlreadyExists,
    SessionExpired,
    SessionNotActive,
    SessionNotFound,
    SessionStoreError,
    TableNotFound,
    ToolCallConflict,
    Unavailable,
    VersionConflict,
)
from .ids import CounterIds, IdFactory, RandomIds
from .item import METADATA_OVERHEAD
from .lifecycle import TRANSITIONS
from .models import Context, Loaded, Session, Status, ToolCallRecord
from .retry import RetryPolicy
from .store import SessionStore

__all__ = [
    "JSON",
    "METADATA_OVERHEAD",
    "TRANSITIONS",
    "Clock",
    "ConflictRetriesExhausted",
    "Context",
    "ContextFull",
    "CounterIds",
    "DynamoDBError",
    "IdFactory",
    "InvalidInput",
    "InvalidTransition",
    "ItemOverLimit",
    "ItemTooLarge",
    "Loaded",
    "ManualClock",
    "RandomIds",
    "RequestOverLimit",
    "RetryPolicy",
    "Session",
    "SessionAlreadyExists",
    "SessionExpired",
    "SessionNotActive",
    "SessionNotFound",
    "SessionStore",
    "SessionStoreError",
    "Status",
    "SystemClock",
    "TableNotFound",
    "ToolCallConflict",
    "ToolCallRecord",
    "Unavailable",
    "VersionConflict",
    "connect",
    "format_timestamp",
]
