"""The lease of the claim a tool holds, kept while the tool waits for the client.

Layer: MCP, over the core's ``round_trips``. Why: a tool in a handshake-era session may ask the
client several times (``back_channel``), and each wait is bounded, but not their sum: without a
renewal a retry of the call is told "outcome unknown" while the tool still runs. The back
channel puts a ``Held`` in each request's ASGI scope (``LEASE_SCOPE_KEY``); ``calls`` hands it
the claim of the call it runs, for as long as the tool runs; the relay calls ``keep`` when it
opens an ask and after each poll that found no answer. ``keep`` renews only once less than half
the lease is left: one conditional UpdateItem (1 WCU) per half lease spent asking, none for a
call that finishes within half its lease. The lease still bounds the tool's own work between
asks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

from ..aio import AsyncSessionStore
from ..claims import Claim
from ..errors import SessionStoreError
from . import traced

#: ASGI scope key under which the back channel hands a request's ``Held`` to ``calls``.
LEASE_SCOPE_KEY: Final = "io.sessionstore.lease"

logger = logging.getLogger(__name__)


@dataclass
class Held:
    """The claim this request's tool holds, if any, and when its lease ends (epoch ms)."""

    store: AsyncSessionStore
    claim: Claim | None = None
    round_number: int = 1
    lease_ms: int = 0
    until_ms: int = 0
    renewing: bool = False  # one renewal at a time, however many asks wait at once

    def hold(self, claim: Claim, round_number: int, lease_ms: int, until_ms: int) -> None:
        """From now on, until ``release``, ``claim`` (at ``round_number``) is this request's."""
        self.claim = claim
        self.round_number = round_number
        self.lease_ms = lease_ms
        self.until_ms = until_ms

    def release(self) -> None:
        self.claim = None

    async def keep(self) -> None:
        """Renew the lease if less than half of it is left. Never raises: a renewal that fails
        leaves the lease as it was, and the wait goes on."""
        claim, core = self.claim, self.store.store
        if claim is None or self.renewing:
            return
        if self.until_ms - core.table.now_ms() > self.lease_ms // 2:
            return
        self.renewing = True
        try:
            until = await self.store.run(
                traced.renew_lease,
                core.table,
                claim,
                self.round_number,
                lease_ms=self.lease_ms,
            )
        except SessionStoreError as exc:  # the store, for now: the next poll tries again
            logger.warning("tool call %r: lease not renewed: %s", claim.tool_call_id, exc)
            return
        finally:
            self.renewing = False
        if until is None:  # no longer ours (completed, lapsed, expired): nothing to keep
            self.claim = None
        elif self.claim is claim:
            self.until_ms = until


def held_in(scope: Any) -> Held | None:
    """The ``Held`` the back channel put in this request's ASGI ``scope``, if any."""
    held = scope.get(LEASE_SCOPE_KEY) if isinstance(scope, dict) else None
    return held if isinstance(held, Held) else None
