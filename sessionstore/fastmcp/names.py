"""FastMCP's names as the store's: the owner, the session id and the attribute of each state key.

A FastMCP ``Session`` is addressed by its principal, a session id (or FastMCP's fixed ``_user``
for the injected per-user bucket) and a key; the store by an owner, a session id and an
attribute name. These functions are the one mapping between the two, pure and deterministic:
every instance and process must compute the same item for the same FastMCP session, so the
mapping is a contract of the table's contents, not a detail of one process.

This module sits below ``state`` and ``dispatch`` and does no I/O; it reads FastMCP's
``Session`` only for the two fields FastMCP built it with, so it imports nothing of FastMCP at
run time.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from ..errors import InvalidInput

if TYPE_CHECKING:
    from fastmcp.server.sessions import Session

__all__ = [
    "FASTMCP_USER_ID",
    "KEY_PREFIXES",
    "USER_PREFIX",
    "attribute_name",
    "identity",
    "principal_owner",
    "store_session_id",
]

#: FastMCP's fixed id of the injected per-user bucket (``sessions._USER_SESSION_ID``).
FASTMCP_USER_ID = "_user"
#: Store ids of per-user buckets; ``create_session`` mints uuid4s, which never look like this,
#: so an agent passing such an id as ``session_id`` is refused.
USER_PREFIX = "user-"
#: The prefixes of the attributes holding state keys (``attribute_name``).
KEY_PREFIXES = ("k.", "h.")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,62}\Z")


def attribute_name(key: object) -> str:
    """The attribute holding FastMCP state key ``key``: ``k.<key>`` for a plain key (letters,
    digits, ``_.-``, up to 62), else ``h.`` and 60 hex digits of its sha256 -- an attribute name
    is at most 64 characters of a small alphabet, and the prefix keeps both apart from the
    store's reserved names. Session state is only ever read by key, so the name need not be
    reversible."""
    if not isinstance(key, str):
        raise InvalidInput(f"a session state key must be a string, not {type(key).__name__}")
    if _PLAIN_KEY.match(key):
        return "k." + key
    return "h." + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:60]


def principal_owner(principal: str | None) -> str:
    """The store owner of FastMCP principal ``principal``: FastMCP's own key segment (the sha256
    of the principal's JSON, or ``anon`` without auth), so isolation is exactly FastMCP's."""
    if principal is None:
        return "anon"
    return hashlib.sha256(principal.encode("utf-8", "surrogatepass")).hexdigest()


def store_session_id(session_id: str, owner: str) -> str:
    """The store id of FastMCP session ``session_id``: the id itself, or ``user-<owner>`` for
    the per-user bucket (store ids are one namespace; FastMCP's ``_user`` is per principal)."""
    return USER_PREFIX + owner if session_id == FASTMCP_USER_ID else session_id


def identity(session: Session) -> tuple[str, str]:
    """(owner, store id) of a FastMCP ``Session``, from the fields FastMCP built it with."""
    owner = principal_owner(session._principal)
    return owner, store_session_id(session._session_id, owner)
