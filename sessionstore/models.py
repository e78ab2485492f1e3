"""What the store hands back: immutable snapshots of stored items."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, overload

from .codec import JSON, decode
from .status import Status

_STATUS = {s.value: s for s in Status}


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


@dataclass(frozen=True)
class Session:
    """The metadata item as read or written -- not the context: its messages live in page items
    (``SessionStore.context``, ``SessionStore.load``), and ``message_count`` / ``context_bytes``
    count what has been appended (an append whose page never landed counts, see
    ``SessionStore.append_context``).

    Equal when every field is equal; hashed on ``(session_id, version, incarnation)`` -- a
    snapshot's identity -- because its attributes are not hashable. ``incarnation`` is the
    create token: it tells a session apart from an earlier one that had the same id.

    ``attribute_bytes``, ``write_tokens`` and ``inline_context`` are bookkeeping the store
    needs (the attributes' size bound, the request tokens of recent writes, the messages a
    session from before context pages holds in its metadata item); they take no part in
    equality. ``None`` means the item predates them.
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
    attribute_bytes: int | None = field(default=None, repr=False, compare=False)
    write_tokens: Mapping[str, int] | None = field(default=None, repr=False, compare=False)
    inline_context: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def paged_count(self) -> int:
        """Messages counted in pages (``message_count`` less the inline ones)."""
        return self.message_count - len(self.inline_context)

    def __hash__(self) -> int:
        return hash((self.session_id, self.version, self.incarnation))

    @classmethod
    def from_wire(cls, item: dict[str, Any]) -> Session:
        """From a low-level item (``{"version": {"N": "3"}, ...}``), reading only the fields a
        Session has -- every write's ALL_NEW comes this way, ring slots and all."""
        owner = item.get("owner")
        attrs = item.get("attrs")
        counted = item.get("attrBytes")
        tokens = item.get("tk")
        context = item.get("context")
        inline = tuple([m["S"] for m in context["L"]]) if context is not None else ()
        count = item.get("messageCount")
        return build_session(
            item["sessionId"]["S"],
            int(item["version"]["N"]),
            _STATUS[item["status"]["S"]],
            None if owner is None else owner["S"],
            item["createdAt"]["S"],
            item["updatedAt"]["S"],
            int(item["ttl"]["N"]),
            len(inline) + (0 if count is None else int(count["N"])),
            int(item["contextBytes"]["N"]) if "contextBytes" in item else 0,
            item["createToken"]["S"] if "createToken" in item else "",
            Attributes({k: v["S"] for k, v in attrs["M"].items()} if attrs is not None else None),
            None if counted is None else int(counted["N"]),
            None if tokens is None else {k: int(v["N"]) for k, v in tokens["M"].items()},
            inline,
        )

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Session:
        attr_bytes = item.get("attrBytes")
        inline = tuple(item.get("context", ()))
        tokens = item.get("tk")
        return build_session(
            item["sessionId"],
            int(item["version"]),
            _STATUS[item["status"]],
            item.get("owner"),
            item["createdAt"],
            item["updatedAt"],
            int(item["ttl"]),
            len(inline) + int(item.get("messageCount", 0)),
            int(item.get("contextBytes", 0)),
            item.get("createToken", ""),
            Attributes(item.get("attrs")),
            None if attr_bytes is None else int(attr_bytes),
            None if tokens is None else {k: int(v) for k, v in tokens.items()},
            inline,
        )


def build_session(
    session_id: str,
    version: int,
    status: Status,
    owner: str | None,
    created_at: str,
    updated_at: str,
    ttl: int,
    message_count: int,
    context_bytes: int,
    incarnation: str,
    attributes: Attributes,
    attribute_bytes: int | None,
    write_tokens: Mapping[str, int] | None,
    inline_context: tuple[str, ...],
) -> Session:
    """``Session(...)`` with every field given, for the parsers: a frozen dataclass's
    ``__init__`` sets its fields one ``object.__setattr__`` call at a time, and every write
    builds a Session from its response; here they are set in one step, with the same result."""
    session = _new(Session)
    _setattr(
        session,
        "__dict__",
        {
            "session_id": session_id,
            "version": version,
            "status": status,
            "owner": owner,
            "created_at": created_at,
            "updated_at": updated_at,
            "ttl": ttl,
            "message_count": message_count,
            "context_bytes": context_bytes,
            "incarnation": incarnation,
            "attributes": attributes,
            "attribute_bytes": attribute_bytes,
            "write_tokens": write_tokens,
            "inline_context": inline_context,
        },
    )
    return session


_new = object.__new__
_setattr = object.__setattr__
# ``build_session`` must set exactly the dataclass's fields: a field added there and not here
# would be missing from every parsed Session.
_blank: list[Any] = [None] * len(fields(Session))
if list(vars(build_session(*_blank))) != [f.name for f in fields(Session)]:
    raise TypeError("models.build_session is out of step with Session's fields")
del _blank


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


class Loaded(NamedTuple):
    """``SessionStore.load``: the metadata, the context and the live tool-call history, read by
    one Query."""

    session: Session
    context: Context
    tool_calls: list[ToolCallRecord]
