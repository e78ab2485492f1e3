"""FastMCP's session state in the store: an integration layer above the public core API.

Layer: like ``sessionstore.mcp``, this sits on ``AsyncSessionStore`` and nothing below it. Why it
exists: FastMCP keeps a session's state (``SessionProvider``'s ``create_session`` /
``end_session``, ``await get_session(session_id)``, an injected ``session: UserSession``,
``Session.get/set/delete/clear/end``) as one dict under one key of an ``AsyncKeyValue`` and
read-modify-writes the whole dict on every ``set``: two concurrent ``set``\\ s of different keys
on a shared store lose one of them, ``end`` racing a ``set`` brings the session back, and nothing
expires. The one line that moves it into the table::

    mcp = FastMCP("demo", session_state_store=StoreSessionState(store))

Tools written for FastMCP stay as they are. What changes behind them:

* each FastMCP session is a store session (owner: FastMCP's principal segment, the sha256 of the
  authenticated principal or ``anon``; id: the id ``create_session`` minted), and each state key
  one of its attributes. ``set`` and ``delete`` go **last writer wins per key**: one
  ``update_attributes`` naming that key alone, so concurrent writes of different keys all land,
  on one instance or many. Each is one request, the transaction, with nothing read back (an
  instance that has not seen the session yet reads it first; now and then a ``set`` takes a
  second transaction: the state item's size bound only grows with each write, and when it
  refuses one the whole state is put again with the bound exact);
* ``get`` and the check behind ``get_session`` are one strongly consistent Query each;
* ``clear`` removes every key pinned to the version it read (a concurrent ``set`` makes it read
  again and retry), so it is atomic; ``end`` closes the session (``active -> closing``, then
  ``closed`` with the ttl of its items brought to at most ``ENDED_TTL_SECONDS``, 60 s, after
  the end: ``close_and_expire``, one transaction), after which every write is refused by its
  condition: the id never resolves again and nothing is written under it; DynamoDB's TTL then
  deletes its items, as FastMCP's own store deletes the key;
* ``create_session`` opens the session with the store's absolute cap (``ttl_seconds``) and idle
  expiry (``idle_seconds``); an expired, ended, unknown or another principal's id is FastMCP's
  own ``InvalidSession`` ("Invalid or unknown session."). A session used (resolved, read or
  written) at least once every ``idle_seconds`` lives to its cap, a read alone moving its idle
  deadline on when no more than ``idle_seconds`` of it is left (one ``touch``); one left alone
  expires between ``idle_seconds`` and ``idle_seconds`` plus its slack (``idle_slack``: half
  of it, rounded up) after its last use. The slack is kept in the store, so a session only
  read is touched at most about once per slack;
* the injected per-user bucket (``session: UserSession``) is a store session of its own per
  principal, created by its first write, with ``user_ttl_seconds`` and no idle expiry; its
  ``end`` empties it (atomically, like ``clear``) so it stays usable, as in FastMCP. Its first
  write creates it and then activates it; a bucket whose activation did not happen (a fault, a
  crash, a racing first write) is activated by the next request that reads it (one
  UpdateItem), so it is never refused.

How: FastMCP builds its ``Session`` objects itself, so the adapter cannot be reached below the
read-modify-write. Constructing a ``StoreSessionState`` installs, once per process, a dispatch
on ``fastmcp.server.sessions.Session``'s methods: a ``Session`` whose server was given a
``StoreSessionState`` is served by it; any other (another server in the same process, with
FastMCP's own store) runs FastMCP's own code unchanged. Every other use of the key-value store
(``ctx.set_state``, visibility rules) goes to ``other`` -- FastMCP's default in-memory store
unless given. Limits: a session's state takes at most ``ATTRIBUTES_MAX_BYTES`` (4 KiB,
``ItemTooLarge``); values are JSON (as FastMCP stores them); a key is any string (a key that is
not a plain name is kept under a digest of it).

Modules: ``state`` (``StoreSessionState``: each ``Session`` operation on the store),
``dispatch`` (the hook on FastMCP's ``Session``), ``names`` (FastMCP's principals, ids and keys
as the store's owners, ids and attribute names), ``demo`` and ``__main__`` (an example server
and its process).
"""

from .names import attribute_name, principal_owner, store_session_id
from .state import CLEAR_ATTEMPTS, ENDED_TTL_SECONDS, StoreSessionState, idle_slack

__all__ = [
    "CLEAR_ATTEMPTS",
    "ENDED_TTL_SECONDS",
    "StoreSessionState",
    "attribute_name",
    "idle_slack",
    "principal_owner",
    "store_session_id",
]
