"""``sessionstore show SESSION_ID``: a session's metadata, then its context and tool-call history.

The context and history are printed by the ``context`` and ``history`` modules' writers; what is
``show``'s own is the metadata, and what it says of an expired session: its id and ttl, all the
store tells of it.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from ..clock import SystemClock
from ..errors import SessionExpired
from ..models import Session
from .common import Command, session_arguments
from .context import messages, write_context
from .history import record_json, write_history
from .output import dumps, span, terminal_width, utc, write_array, write_fields
from .target import Target


def register(command: Command) -> None:
    show = command("show", "a session: metadata, context and tool-call history")
    session_arguments(show)
    show.add_argument("--json", action="store_true", help="one JSON document")
    show.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    out, sid, owner = sys.stdout, args.session_id, args.owner
    with Target(args) as target:
        store = target.store
        try:
            session = store.get_session(sid, owner=owner)
        except SessionExpired as exc:
            _write_expired(out, exc, args.json)
            raise
        now_s = SystemClock().now_ms() // 1000
        if args.json:
            out.write(f'{{"session": {dumps(_session_json(session, now_s))}, "context": [')
            context = messages(store, sid, owner, None)
            write_array(out, ({"seq": seq, "message": m} for seq, m in context))
            out.write('], "toolCalls": [')
            write_array(out, (record_json(r) for r in store.tool_calls(sid, owner=owner)))
            out.write("]}\n")
            return
        width = terminal_width()
        write_fields(out, _session_fields(session, now_s), width)
        out.write("\ncontext:\n")
        write_context(out, messages(store, sid, owner, None), width)
        out.write("\ntool calls:\n")
        write_history(out, store.tool_calls(sid, owner=owner), width)


def _session_json(session: Session, now_s: int) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "sessionId": session.session_id,
        "status": session.status.value,
        "owner": session.owner,
        "version": session.version,
        "createdAt": session.created_at,
        "updatedAt": session.updated_at,
        "ttl": session.ttl,
        "ttlUtc": utc(session.ttl),
        "expired": session.expires_at <= now_s,
        "messageCount": session.message_count,
        "contextBytes": session.context_bytes,
        "attributes": dict(session.attributes),
    }
    if session.idle_seconds is not None:  # an idle session: when it expires unless used
        shown["idleSeconds"] = session.idle_seconds
        shown["expiresAt"] = session.expires_at
    return shown


def _write_expired(out: IO[str], exc: SessionExpired, as_json: bool) -> None:
    """What the store tells of an expired session: its id and ttl (it reads nothing more)."""
    if as_json:
        session = {"sessionId": exc.session_id, "ttl": exc.ttl, "ttlUtc": utc(exc.ttl)}
        document = {"session": {**session, "expired": True}, "context": None, "toolCalls": None}
        out.write(dumps(document) + "\n")
        return
    fields = [
        ("session", exc.session_id),
        ("status", "EXPIRED (the store reads nothing more of an expired session)"),
        ("ttl", f"{exc.ttl}  {utc(exc.ttl)}  EXPIRED"),
    ]
    write_fields(out, fields, terminal_width())


def _session_fields(session: Session, now_s: int) -> list[tuple[str, str]]:
    left = session.ttl - now_s
    when = "EXPIRED" if left <= 0 else f"in {span(left)}"
    fields = [
        ("session", session.session_id),
        ("status", session.status.value),
        ("owner", "-" if session.owner is None else session.owner),
        ("version", str(session.version)),
        ("created", session.created_at),
        ("updated", session.updated_at),
        ("ttl", f"{session.ttl}  {utc(session.ttl)}  {when}"),
    ]
    if session.idle_seconds is not None:
        idle_left = session.expires_at - now_s
        idle_when = "EXPIRED" if idle_left <= 0 else f"in {span(idle_left)} unless used"
        fields.append(
            ("idle", f"{session.idle_seconds} s: expires {utc(session.expires_at)}  {idle_when}")
        )
    fields.append(("messages", f"{session.message_count}  ({session.context_bytes} bytes)"))
    raw = session.attributes.raw
    if not raw:
        fields.append(("attributes", "-"))
    for i, name in enumerate(sorted(raw)):
        fields.append(("attributes" if i == 0 else "", f"{name} = {raw[name]}"))  # JSON text
    return fields
