"""The core's claim operations as the MCP layer runs them: each measured as an operation of its
own for telemetry (a span and a tally, as the store's methods are: ``telemetry.traced``).

Layer: MCP, over the core's public ``claims`` and ``round_trips``, which stay free of telemetry (it
observes). Each takes the store's ``table`` first, as the core's function does; ``calls`` and
``lease_keeper`` run them on the store's worker threads. Code that holds a ``SessionStore`` and
wants no spans calls ``sessionstore.claims`` with ``store.table``.
"""

from __future__ import annotations

from .. import claims, round_trips
from ..telemetry import traced

claim = traced("claim_tool_call")(claims.claim)
start_round = traced("start_round")(round_trips.start_round)
suspend_round = traced("suspend_round")(round_trips.suspend_round)
complete = traced("complete_tool_call")(claims.complete)
put_record = traced("record_tool_call")(claims.put_record)
renew_lease = traced("renew_lease")(round_trips.renew)
