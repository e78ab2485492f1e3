"""A routed ``tools/call`` served at most once: claim, run, record, answer a repeat.

MCP layer, the interceptor's second step (``extension``), after ``routing``. ``claims.claim``
says whether this delivery may execute -- if not, the stored result or an error answers it, and
the tool never runs twice under one id; the tool runs with ``current_session()`` set;
``claims.complete`` writes its result into the claimed item. A harmless tool (read-only or
idempotent by the server's annotations) is not claimed: the session is checked, the tool runs,
and ``claims.put_record`` puts its record. A tool that answers ``InputRequiredResult`` carries
its claim to the round that finishes it (``rounds``); one that waits for the client's answers
has its lease kept meanwhile (``lease_keeper``). The close tool runs with its session set
and is neither claimed nor recorded: closing is a lifecycle step. The ``claims`` operations are
the core's (``sessionstore.claims``), each measured as an operation of its own (``traced``), run
over the store's table on its threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, TextContent

from .. import claims
from ..aio import AsyncSessionStore
from ..claims import State
from ..codec import JSON
from ..errors import SessionExpired, SessionStoreError
from . import rounds, traced
from .errors import as_mcp, to_mcp_error
from .lease_keeper import Held, held_in
from .protocol import REPLAYED_KEY, TOOL_CALL_IN_PROGRESS, TOOL_CALL_OUTCOME_UNKNOWN
from .routing import Route
from .sessions import Sessions
from .tool_session import ToolSession, as_current

T = TypeVar("T")

# The extension's parts log under its name, so one logger configures all of it.
logger = logging.getLogger("sessionstore.mcp.extension")


@dataclass(frozen=True)
class Calls:
    """Tool calls served in ``sessions`` of ``store``; a claim is "in progress" for
    ``lease_ms`` before a repeat is told "outcome unknown"."""

    store: AsyncSessionStore
    sessions: Sessions
    lease_ms: int

    async def serve(
        self, route: Route, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """The tool's answer to this delivery, or the answer already recorded for its key."""
        if route.closing:
            return await self._close(route, ctx, call_next)
        claimed, ttl = route.resumed, 0
        try:
            if claimed is None and not route.harmless:
                outcome = await self._claim(route)
                if outcome.state is not State.CLAIMED:
                    return _answer_repeat(outcome)
                claimed = outcome.claim
            else:
                # Checked before the tool runs: a harmless tool is not claimed (running it twice
                # changes nothing), and a later round's session may have ended since the first.
                ttl = (route.checked or await self.sessions.for_request(route.session_id)).ttl
                if claimed is not None:
                    if not claimed.ttl:  # sealed without the ttl: the session's
                        claimed = replace(claimed, ttl=ttl)
                    elif claimed.ttl != ttl:  # sealed in an earlier session under this id
                        raise SessionExpired(route.session_id, claimed.ttl)
                    # A round runs at most once, however often its requestState is re-sent.
                    outcome = await self._run(
                        traced.start_round, claimed, route.round_number, lease_ms=self.lease_ms
                    )
                    if outcome.state is not State.CLAIMED:
                        return _answer_repeat(outcome)
        except SessionStoreError as exc:
            raise to_mcp_error(exc) from exc
        return await self._execute(route, claimed, ttl, ctx, call_next)

    async def _close(
        self, route: Route, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        # Closing is a lifecycle step, not a call in the session's history.
        if route.checked is None:
            await as_mcp(self.store.get_session(route.session_id, owner=route.owner))
        with as_current(self._view(route)):
            return await call_next(ctx)

    def _view(self, route: Route) -> ToolSession:
        return ToolSession(
            route.session_id, route.owner, route.tool_call_id, route.tool_name, self.store
        )

    async def _run(self, operation: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """A ``traced`` claims operation over the store's table, on its threads."""
        return await self.store.run(operation, self.store.store.table, *args, **kwargs)

    async def _claim(self, route: Route) -> claims.Outcome:
        ttl = (
            route.checked.ttl
            if route.checked is not None
            else await self.sessions.ttl(route.session_id, route.owner)
        )
        outcome = await self._run(
            traced.claim,
            route.session_id,
            route.tool_call_id,
            route.tool_name,
            route.arguments,
            owner=route.owner,
            ttl=ttl,
            lease_ms=self.lease_ms,
        )
        if outcome.state is State.CLAIMED and outcome.claim.ttl != ttl:
            self.sessions.remember(route.session_id, route.owner, outcome.claim.ttl)
        return outcome

    async def _execute(
        self,
        route: Route,
        claimed: claims.Claim | None,
        ttl: int,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        started = self.store.clock.now_ms()
        held = self._hold(ctx, claimed, route.round_number, started)
        with as_current(self._view(route)):
            try:
                result = await call_next(ctx)
            except MCPError as exc:
                # The tool refused with a protocol error: that is its outcome, recorded as such.
                output: JSON = {"mcpError": exc.error.model_dump(mode="json", exclude_none=True)}
                await self._record(route, output, started, claimed, ttl)
                raise
            finally:
                if held is not None:
                    held.release()
        if isinstance(result, InputRequiredResult):
            # Not finished: the next round carries the claim in the sealed requestState, and
            # the answer is kept for a client that lost it and sends this round again.
            suspended = rounds.suspend(result, claimed, route.round_number + 1)
            if claimed is not None:
                await self._keep_suspension(claimed, route.round_number, suspended)
            return suspended
        if isinstance(result, CallToolResult):
            # Without its per-response metadata, which is not part of the outcome.
            dumped = result.model_dump(
                mode="json", by_alias=True, exclude_none=True, exclude={"meta"}
            )
            output = {"callToolResult": dumped}
        else:
            output = {"unrecordable": type(result).__name__}
        await self._record(route, output, started, claimed, ttl)
        return result

    def _hold(
        self,
        ctx: ServerRequestContext[Any, Any],
        claimed: claims.Claim | None,
        round_number: int,
        started: int,
    ) -> Held | None:
        """Hand the claim to the back channel, which keeps its lease while the tool waits for
        the client (``lease_keeper``); None when nothing is claimed or no back channel serves
        this."""
        held = held_in(getattr(ctx.request, "scope", None))
        if held is None or claimed is None:
            return None
        # A later round's claim comes from its sealed state: its lease was renewed just now.
        until = claimed.lease_until_ms
        held.hold(
            claimed,
            round_number,
            self.lease_ms,
            started + self.lease_ms if until is None else until,
        )
        return held

    async def _keep_suspension(
        self, claimed: claims.Claim, round_number: int, answer: InputRequiredResult
    ) -> None:
        text = answer.model_dump_json(by_alias=True, exclude_none=True)
        try:
            await self._run(traced.suspend_round, claimed, round_number, text)
        except SessionStoreError as exc:
            # The round itself succeeded: only a re-send of it would miss the kept answer.
            logger.warning(
                "round %d of tool call %r: its answer could not be kept: %s",
                round_number,
                claimed.tool_call_id,
                exc,
            )

    async def _record(
        self, route: Route, output: JSON, started: int, claimed: claims.Claim | None, ttl: int
    ) -> None:
        duration = max(0, self.store.clock.now_ms() - started)
        sid, call_id, arguments = route.session_id, route.tool_call_id, route.arguments
        try:
            if claimed is not None:
                await self._run(traced.complete, sid, call_id, claimed, arguments, output, duration)
            else:
                await self._run(
                    traced.put_record,
                    sid,
                    call_id,
                    route.tool_name,
                    arguments,
                    output,
                    duration,
                    ttl=ttl,
                )
        except SessionStoreError as exc:
            error = to_mcp_error(exc)
            if claimed is None:  # harmless: it ran, but running it changed nothing
                raise error from exc
            raise MCPError(
                error.code,
                f"the tool ran but its result could not be recorded: {error.message}",
                {**(error.data or {}), "executed": True},
            ) from exc


def _answer_repeat(outcome: claims.Outcome) -> HandlerResult:
    claim = outcome.claim
    ids = {"sessionId": claim.session_id, "toolCallId": claim.tool_call_id}
    if outcome.state is State.RECORDED and outcome.record is not None:
        stored = outcome.record.output
        if isinstance(stored, dict) and "callToolResult" in stored:
            replay = CallToolResult.model_validate(stored["callToolResult"])
            return replay.model_copy(update={"meta": {REPLAYED_KEY: True}})
        if isinstance(stored, dict) and "mcpError" in stored:
            error = stored["mcpError"]
            raise MCPError(error["code"], error["message"], error.get("data"))
        return CallToolResult(
            content=[TextContent(type="text", text=f"recorded without a result: {stored}")],
            is_error=True,
            _meta={REPLAYED_KEY: True},
        )
    if outcome.state is State.SUSPENDED and outcome.suspended is not None:
        # The round's own answer again (the SDK seals its requestState afresh): the next round
        # is still taken once, by whichever delivery brings it first.
        again = InputRequiredResult.model_validate_json(outcome.suspended)
        return again.model_copy(update={"meta": {**(again.meta or {}), REPLAYED_KEY: True}})
    if outcome.state is State.IN_PROGRESS:
        raise MCPError(
            TOOL_CALL_IN_PROGRESS,
            f"tool call {claim.tool_call_id!r} is being executed by another delivery; "
            "ask again later for its result",
            {"reason": "in_progress", **ids, "leaseUntil": claim.lease_until_ms},
        )
    raise MCPError(
        TOOL_CALL_OUTCOME_UNKNOWN,
        f"tool call {claim.tool_call_id!r} was started but never recorded: it may or may not "
        "have run, and it will not be run again under this id",
        {"reason": "outcome_unknown", **ids},
    )
