"""What the store hands back: immutable snapshots of stored items."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from .codec import JSON, decode
from .status import Status


class Context(Sequence[JSON]):
    """A session's context messages, decoded from their JSON text on first access.

    Every versioned write returns the whole item, context included, and most callers never look
    at the messages: decoding them eagerly made each append cost more the longer the session.
    Compares equal to a tuple of the same values, and prints like one.
    """

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: Iterable[str] = ()) -> None:
        self._raw = tuple(raw)
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
        if isinstance(other, tuple):
            return self._values() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return repr(self._values())


@dataclass(frozen=True)
class Session:
    session_id: str
    version: int
    status: Status
    owner: str | None
    created_at: str
    updated_at: str
    ttl: int  # epoch seconds
    context: Context = field(default_factory=Context)
    context_bytes: int = 0

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Session:
        return cls(
            session_id=item["sessionId"],
            version=int(item["version"]),
            status=Status(item["status"]),
            owner=item.get("owner"),
            created_at=item["createdAt"],
            updated_at=item["updatedAt"],
            ttl=int(item["ttl"]),
            context=Context(item.get("context", ())),
            context_bytes=int(item.get("contextBytes", 0)),
        )


@dataclass(frozen=True)
class ToolCallRecord:
    session_id: str
    tool_call_id: str
    tool_name: str
    input: JSON
    output: JSON
    duration_ms: int
    recorded_at: str
    ttl: int  # epoch seconds

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> ToolCallRecord:
        return cls(
            session_id=item["sessionId"],
            tool_call_id=item["toolCallId"],
            tool_name=item["toolName"],
            input=decode(item["input"]),
            output=decode(item["output"]),
            duration_ms=int(item["durationMs"]),
            recorded_at=item["recordedAt"],
            ttl=int(item["ttl"]),
        )
