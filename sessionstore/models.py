"""What the store hands back: immutable snapshots of stored items.

Layer: the bottom; it imports nothing of the store, so every layer can name these types.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple, TypeAlias, overload

__all__ = [
    "JSON",
    "Attributes",
    "Context",
    "Loaded",
    "Session",
    "Status",
    "StoredAttributes",
    "ToolCallRecord",
    "decode",
]

#: A JSON value as Python holds it (``codec`` checks and encodes them).
JSON: TypeAlias = Any  # None | bool | int | float | str | list[JSON] | dict[str, JSON]


def decode(text: str) -> JSON:
    """A stored JSON text as its value."""
    return json.loads(text)


class Status(StrEnum):
    """A session's status; the allowed moves are ``lifecycle.TRANSITIONS``."""

    INITIALIZING = "initializing"
    ACTIVE = "active"
    CLOSING = "closing"
    CLOSED = "closed"


class Context(Sequence[JSON]):
    """A session's context messages as read (``SessionStore.load``), decoded from their JSON
    text on first access: many callers only count them or pass them on.

    Equality is by value: equal to another ``Context``, tuple or list holding the same messages,
    and it prints like a tuple. It is not hashable -- like a list, since messages are usually
    dicts -- which also keeps ``hash`` consistent with equality to a tuple.
    """

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: Iterable[str] = ()) -> None:
        self._raw = raw if type(raw) is tuple else tuple(raw)
        self._decoded: tuple[JSON, ...] | None = None

    def _values(self) -> tuple[JSON, ...]:
        if self._decoded is None:
            self._decoded = tuple(decode(m) for m in self._raw)
        return self._decoded

    @overload
    def __getitem__(self, index: int) -> JSON: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[JSON, ...]: ...
    def __getitem__(self, index: int | slice) -> JSON:
        return self._values()[index]

    def __len__(self) -> int:
        return len(self._raw)

    def __iter__(self) -> Iterator[JSON]:
        return iter(self._values())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Context):
            return self._raw == other._raw or self._values() == other._values()
        if isinstance(other, tuple | list):
            return len(self._raw) == len(other) and list(self._values()) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._values())


class Attributes(Mapping[str, JSON]):
    """A session's attributes (``update_attributes``), read-only, each value decoded from its
    JSON text on first access.

    Equality is by value, with any other mapping (a dict included); not hashable, like a dict.
    """

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: Mapping[str, str] | None = None) -> None:
        self._raw: Mapping[str, str] = raw if raw is not None else {}
        self._decoded: dict[str, JSON] | None = None

    def _values(self) -> dict[str, JSON]:
        if self._decoded is None:
            self._decoded = {k: decode(v) for k, v in self._raw.items()}
        return self._decoded

    def __getitem__(self, name: str) -> JSON:
        if name not in self._raw:
            raise KeyError(name)
        return self._values()[name]

    def __len__(self) -> int:
        return len(self._raw)

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attributes):
            return self._raw == other._raw or self._values() == other._values()
        if isinstance(other, Mapping):
            return self._values() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._values())

    @property
    def raw(self) -> Mapping[str, str]:
        """The stored JSON text of each value (what the item holds)."""
        return self._raw


@dataclass(frozen=True, slots=True)
class StoredAttributes:
    """The attributes as their item holds them: of which incarnation, at which ``rev``, and
    the bound of their size."""

    incarnation: str
    rev: int
    attributes: Attributes
    bytes: int


@dataclass(frozen=True)
class Session:
    """The metadata item as read or written (``sessionstore.item``) -- not the context: its
    messages live in page items (``SessionStore.context``, ``SessionStore.load``), and
    ``message_count`` / ``context_bytes`` count what has been appended (an append whose page
    never landed counts, see ``SessionStore.append_context``).

    Equal when every field but the store's bookkeeping is equal (``attribute_bytes``, the
    attributes' size bound; ``attributes_rev``, how many times they changed; ``write_tokens``);
    hashed on ``(session_id, version, incarnation)``, a snapshot's identity, since its attributes
    (read from their own item, ``sessionstore.attributes``) are not hashable. ``incarnation``
    tells a session apart from an earlier one that had the same id.

    ``ttl`` is the absolute cap (DynamoDB deletes the item after it). A session created with
    ``idle_seconds`` also expires when no accepted write touched it for that long:
    ``idle_until`` is that deadline as the item holds it, moved by every write (it may pass
    ``ttl``). ``expires_at``, the earlier of the two, is when the session is refused. A
    fixed-ttl session has ``idle_seconds`` None and ``idle_until`` at least ``ttl`` (0, the
    default, means ``ttl``).
    """

    session_id: str
    version: int
    status: Status
    owner: str | None
    created_at: str
    updated_at: str
    ttl: int  # epoch seconds
    message_count: int = 0
    context_bytes: int = 0
    incarnation: str = field(default="", repr=False)
    attributes: Attributes = field(default_factory=Attributes)
    attribute_bytes: int = field(default=0, repr=False, compare=False)
    write_tokens: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)
    attributes_rev: int = field(default=0, repr=False, compare=False)
    # Out of the repr like the bookkeeping above: a fixed-ttl session prints as it always did.
    idle_seconds: int | None = field(default=None, repr=False)
    idle_until: int = field(default=0, repr=False)  # epoch seconds; 0: the ttl

    def __post_init__(self) -> None:
        if self.idle_until == 0:
            object.__setattr__(self, "idle_until", self.ttl)

    def __hash__(self) -> int:
        return hash((self.session_id, self.version, self.incarnation))

    @property
    def expires_at(self) -> int:
        """Epoch seconds from which the session is refused: its cap or its idle deadline."""
        return min(self.ttl, self.idle_until)


@dataclass(frozen=True)
class ToolCallRecord:
    """A recorded tool call. Equal when every field is equal; hashed on its identity
    ``(session_id, tool_call_id, recorded_at)``, since input and output may be dicts."""

    session_id: str
    tool_call_id: str
    tool_name: str
    input: JSON
    output: JSON
    duration_ms: int
    recorded_at: str
    ttl: int  # epoch seconds

    def __hash__(self) -> int:
        return hash((self.session_id, self.tool_call_id, self.recorded_at))


class Loaded(NamedTuple):
    """``SessionStore.load``: the metadata, the context and the live tool-call history, read by
    one Query."""

    session: Session
    context: Context
    tool_calls: list[ToolCallRecord]
