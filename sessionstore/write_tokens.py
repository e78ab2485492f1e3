"""Did my lost write land? One answer for every write to the metadata item.

A write whose response is lost is re-sent (by botocore, then by the attempt driver). A re-sent
copy of an attempt that had landed must not apply twice, and the writer must learn what its
landed attempt did. So every write to the metadata item -- create, transition, status update,
attribute change, context reservation -- *names* its request token in the map ``tk``::

    SET tk.<token> = <value>   on the condition   attribute_not_exists(tk.<token>)

A re-sent copy of a landed attempt is refused, and the refusal's ALL_OLD shows the token, however
many other writes came in between. ``<value>`` is the write's time in epoch seconds; a context
reservation also keeps the first seq it reserved there (``now_s * SEQ_SPAN + seq``), which
readers use to tell an append in flight from a failed one.

The map stays small without any extra request, and without refusing writers: each write removes
the tokens of this instance's own finished writes to the session (``settled``: nothing can
re-send them), and any token older than ``TOKEN_HORIZON_S`` in the last copy of the item it saw
(a token is needed only while its write may still be re-sent: botocore's attempts with their
timeouts, times the driver's settling re-sends -- minutes; an hour is far beyond). A fresh
instance removes nothing, so the map holds at most the writes of the last hour by instances that
never wrote to the session again. ``TOKEN_CAP`` bounds the item's size even then: a write finding
the map full removes what the horizon allows from the copy its refusal returned, or fails as
``Unavailable`` when every entry is younger than that.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping

from .conditions import Clause, Condition, Name, Update, Value, clause, remove, set_

__all__ = [
    "TOKEN_CAP",
    "TOKEN_HORIZON_S",
    "carries",
    "name_token",
    "removable",
    "room",
    "token_absent",
]

#: At most this many tokens in ``tk`` (bounds the metadata item's size: ``item.METADATA_OVERHEAD``).
TOKEN_CAP = 100
#: A token longer than this is named by a digest of this length (an ``IdFactory`` may make
#: tokens of up to 64 characters; the map's size bound should not pay for that).
KEY_LENGTH = 22
#: A token older than this (seconds) belongs to a write that ended long ago: anyone removes it.
TOKEN_HORIZON_S = 3600
#: A reservation's value is ``now_s * SEQ_SPAN + first seq``; other writes' is ``now_s`` alone.
SEQ_SPAN = 10**12
#: The metadata item's map of tokens (``item.Meta.TOKENS``).
TOKENS = "tk"
#: How many removed keys a full map's condition may name: any one of them is room.
_ROOM_PROOFS = 4


def token_time(value: int) -> int:
    """When a ``tk`` entry was written (epoch seconds)."""
    return value // SEQ_SPAN if value >= SEQ_SPAN else value


def token_seq(value: int) -> int:
    """The first seq a reservation's ``tk`` entry holds."""
    return value % SEQ_SPAN


def key(token: str) -> str:
    """The name ``token`` has in ``tk``: itself, or a 120-bit digest of a long one."""
    if len(token) <= KEY_LENGTH:
        return token
    digest = hashlib.blake2b(token.encode(), digest_size=15).digest()
    return "~" + base64.urlsafe_b64encode(digest).decode()[: KEY_LENGTH - 1]


def removable(
    seen: Mapping[str, int] | None, settled: tuple[str, ...], token: str, now_s: int
) -> tuple[str, ...]:
    """Keys a write may remove: this instance's finished tokens', and any older than the
    horizon in ``seen`` (the last copy of the item); never ``token``'s."""
    horizon = now_s - TOKEN_HORIZON_S
    gone = [key(t) for t in settled]
    if seen:
        gone += [t for t, v in seen.items() if token_time(v) <= horizon]
    own = key(token)
    return tuple(k for k in dict.fromkeys(gone) if k != own)[:TOKEN_CAP]


def token_absent(token: str) -> Condition:
    """No attempt of this write has landed: ``tk`` does not name its token."""
    return clause("token_absent", "attribute_not_exists({})", Name(TOKENS, key(token)))


def room(gone: tuple[str, ...], present: Mapping[str, int] | None) -> Condition:
    """The map may take one more token: it is below the cap -- or one of the keys this write
    removes is there (``present``: the copy they were seen in; a few are enough), so a writer
    that cleans up after itself is never refused by a full map."""
    condition = clause("below_cap", "size({}) < {}", Name(TOKENS), Value(TOKEN_CAP))
    seen = [k for k in gone if present is not None and k in present][:_ROOM_PROOFS]
    for k in seen:
        condition = condition | clause("frees_room", "attribute_exists({})", Name(TOKENS, k))
    return condition


def name_token(token: str, value: Clause, gone: tuple[str, ...]) -> Update:
    """Name ``token`` in ``tk`` with ``value`` (an expression: the write's time, or a
    reservation's) and remove the keys ``gone``."""
    named = set_("token_named", "{} = " + value.text, Name(TOKENS, key(token)), *value.operands)
    return named + remove(*(Name(TOKENS, k) for k in gone)) if gone else named


def stamp(now_s: int) -> Clause:
    """The value most writes name their token with: the time."""
    return Clause("now", "{}", (Value(now_s),))


def carries(item: Mapping[str, object], token: str) -> bool:
    """The item (python-typed) names ``token``: the attempt that sent it landed."""
    tokens = item.get(TOKENS)
    return isinstance(tokens, Mapping) and key(token) in tokens
