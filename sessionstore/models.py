"""What the store hands back: immutable snapshots of stored items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .codec import JSON, decode
from .status import Status


@dataclass(frozen=True)
class Session:
    session_id: str
    version: int
    status: Status
    owner: str | None
    created_at: str
    updated_at: str
    ttl: int  # epoch seconds
    context: tuple[JSON, ...] = ()
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
            context=tuple(decode(m) for m in item.get("context", ())),
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
