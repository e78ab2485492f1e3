"""The store in an MCP server: sessions in the table, every tool call executed at most once.

``SessionStoreExtension`` is an SDK ``Extension`` (``mcp/server/extension.py``), the public
seam 2.3.0 offers for this: it adds two request methods (open and close a session) and one
``tools/call`` interceptor. The interceptor rather than a ``ServerMiddleware``: it runs after
the SDK has validated the params and wraps the tool handler itself, so it sees typed params and
the tool's ``CallToolResult`` (a raising tool already turned into ``isError``), on both protocol
generations, legacy and modern alike.

For every ``tools/call`` (see ``protocol`` for the keys and error codes, the README for the
costs): ``routing`` finds the session and the key; ``claims.claim`` says whether this delivery
may execute -- if not, the stored result or an error answers it, and the tool never runs twice
under one id; the tool runs with ``current_session()`` set; ``claims.complete`` writes its result
into the claimed item. A tool the server annotates read-only or idempotent is not claimed: the
session is checked, the tool runs, and ``claims.put_record`` puts its record. A tool that answers
``InputRequiredResult`` carries its claim to the round that finishes it (``rounds``). The
``claims`` operations are the core's (``sessionstore.claims``), run over the store's backend and
memory.

The extension is one class over three modules: ``sessions`` (open, check and end a session,
shared by the methods, the tools and the legacy HTTP layer), ``routing`` (which session and key
a call uses, and whether it is claimed) and this one (claim, run, record, answer a repeat).
"""

from __future__ import annotations

import inspect
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ToolBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    TextContent,
)

from .. import claims
from ..aio import AsyncSessionStore
from ..claims import State
from ..codec import JSON
from ..errors import InvalidInput, SessionExpired, SessionStoreError
from . import rounds
from .capabilities import check_client_capabilities
from .claims import traced
from .mcp_errors import to_mcp_error
from .protocol import (
    CLOSE_METHOD,
    CLOSE_TOOL,
    EXTENSION_ID,
    HANDLE_ARGUMENT,
    IDEMPOTENCY_ARGUMENT,
    OPEN_METHOD,
    OPEN_TOOL,
    REPLAYED_KEY,
    SESSION_ID_KEY,
    TOOL_CALL_ID_KEY,
    TOOL_CALL_IN_PROGRESS,
    TOOL_CALL_OUTCOME_UNKNOWN,
    CloseSessionParams,
    OpenSessionParams,
)
from .routing import CallRouting, Route, legacy_session, valid
from .sessions import DEFAULT_IDLE_SECONDS, SessionLifecycle, principal_owner
from .tool_session import CURRENT_SESSION, ToolSession

T = TypeVar("T")

_ATTACHED: WeakKeyDictionary[MCPServer, SessionStoreExtension] = WeakKeyDictionary()
logger = logging.getLogger(__name__)


class SessionStoreExtension(SessionLifecycle, CallRouting, Extension):
    """Sessions in the table and at-most-once tool calls, on any ``MCPServer``.

    ``lease_seconds``: how long a claim stays "in progress" before a repeat is told "outcome
    unknown" -- longer than the slowest tool. ``default_ttl_seconds`` / ``max_ttl_seconds``
    bound what a session may ask for: its absolute cap. ``idle_seconds``: a session also
    expires after this long without a request that wrote to it (default 1800, the SDK's own
    ``DEFAULT_SESSION_IDLE_TIMEOUT``; None: only the cap): claims move the deadline on at no
    extra request, and a session check (a read-only tool's, the legacy layer's) touches it at
    most once per half idle period. ``open_tool`` / ``close_tool``: the names of the tools it
    contributes for clients that know no custom method (None: not contributed);
    ``handle_argument`` / ``idempotency_argument``: the tool arguments that carry a session
    handle and an idempotency key. Call ``attach(server)`` once the server exists
    (``create_server`` does): the interceptor looks tools up in it.
    """

    identifier = EXTENSION_ID

    def __init__(
        self,
        store: AsyncSessionStore,
        *,
        lease_seconds: int = 300,
        default_ttl_seconds: int = 3600,
        max_ttl_seconds: int = 7 * 86400,
        idle_seconds: int | None = DEFAULT_IDLE_SECONDS,
        open_tool: str | None = OPEN_TOOL,
        close_tool: str | None = CLOSE_TOOL,
        handle_argument: str = HANDLE_ARGUMENT,
        idempotency_argument: str = IDEMPOTENCY_ARGUMENT,
    ) -> None:
        if not isinstance(store, AsyncSessionStore):
            raise InvalidInput("store must be an AsyncSessionStore")
        for name, value in (
            ("lease_seconds", lease_seconds),
            ("default_ttl_seconds", default_ttl_seconds),
            ("max_ttl_seconds", max_ttl_seconds),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{name} must be a positive int")
        if default_ttl_seconds > max_ttl_seconds:
            raise InvalidInput("default_ttl_seconds must not exceed max_ttl_seconds")
        if idle_seconds is not None and (
            isinstance(idle_seconds, bool) or not isinstance(idle_seconds, int) or idle_seconds < 1
        ):
            raise InvalidInput("idle_seconds must be None or a positive int")
        for name, text in (
            ("open_tool", open_tool),
            ("close_tool", close_tool),
            ("handle_argument", handle_argument),
            ("idempotency_argument", idempotency_argument),
        ):
            if text is not None and (not isinstance(text, str) or not text.isidentifier()):
                raise InvalidInput(f"{name} must be a Python identifier, got {text!r}")
        self.store = store
        self.lease_ms = lease_seconds * 1000
        self.default_ttl_seconds = default_ttl_seconds
        self.max_ttl_seconds = max_ttl_seconds
        self.idle_seconds = idle_seconds
        self.open_tool = open_tool
        self.close_tool = close_tool
        self.handle_argument = handle_argument
        self.idempotency_argument = idempotency_argument
        self._server = None
        self._ttls = OrderedDict()

    def attach(self, server: MCPServer) -> None:
        """The server whose tools the interceptor validates and classifies."""
        self._server = server
        _ATTACHED[server] = self

    @staticmethod
    def attached_to(server: MCPServer) -> SessionStoreExtension | None:
        """The extension ``attach``-ed to ``server``, if any."""
        return _ATTACHED.get(server)

    def settings(self) -> dict[str, Any]:
        return {
            "sessionIdKey": SESSION_ID_KEY,
            "toolCallIdKey": TOOL_CALL_ID_KEY,
            "methods": [OPEN_METHOD, CLOSE_METHOD],
            "tools": [t for t in (self.open_tool, self.close_tool) if t],
            "handleArgument": self.handle_argument,
            "idempotencyArgument": self.idempotency_argument,
        }

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding(OPEN_METHOD, OpenSessionParams, self._open),
            MethodBinding(CLOSE_METHOD, CloseSessionParams, self._close),
        )

    def tools(self) -> Sequence[ToolBinding]:
        bindings = []
        for name, fn in (
            (self.open_tool, self._open_tool_fn()),
            (self.close_tool, self._close_tool_fn()),
        ):
            if name:
                # The SDK would send the docstring's indentation along.
                described = {"name": name, "description": inspect.cleandoc(fn.__doc__ or "")}
                bindings.append(ToolBinding(fn, kwargs=described))
        return bindings

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        tool = self._tool(params.name)
        if self._server is not None:  # SEP-2575: refused (-32021) before anything is claimed
            check_client_capabilities(self._server, params.name, ctx)
        arguments: dict[str, Any] = dict(params.arguments or {})
        if tool is None or not valid(tool, arguments):
            return await call_next(ctx)  # the SDK's own error; nothing claimed or written
        declared = tool.parameters.get("properties", {})
        legacy = legacy_session(ctx)
        session_id = self._session_id(arguments, params.meta, legacy, declared)
        if session_id is None:
            if self.handle_argument in declared:
                raise self._session_required(params.name, ctx.protocol_version)
            return await call_next(ctx)  # a tool that needs no session, called without one
        if legacy is not None and legacy.session_id != session_id:
            legacy = None  # an explicit handle names another session: check that one
        owner = principal_owner()
        if params.name == self.close_tool:
            return await self._serve_close(session_id, owner, legacy, params.name, ctx, call_next)
        route = self._route(params, arguments, declared, tool, session_id, owner, legacy)
        # A later round of a multi-round-trip call we claimed carries its claim.
        resumed = rounds.resume(params, session_id, arguments)
        claimed, round_number = resumed if resumed is not None else (None, 1)
        ttl = 0
        try:
            if claimed is None and not route.harmless:
                outcome = await self._claim(route, params.name, arguments)
                if outcome.state is not State.CLAIMED:
                    return _answer_repeat(outcome)
                claimed = outcome.claim
            else:
                # Checked before the tool runs: a harmless tool is not claimed (running it twice
                # changes nothing), and a later round's session may have ended since the first.
                ttl = (route.checked or await self.session_for_request(session_id)).ttl
                if claimed is not None:
                    route = replace(route, tool_call_id=claimed.tool_call_id)
                    if not claimed.ttl:  # sealed without the ttl: the session's
                        claimed = replace(claimed, ttl=ttl)
                    elif claimed.ttl != ttl:  # sealed in an earlier session under this id
                        raise SessionExpired(session_id, claimed.ttl)
                    # A round runs at most once, however often its requestState is re-sent.
                    outcome = await self._run(
                        claims.start_round, claimed, round_number, lease_ms=self.lease_ms
                    )
                    if outcome.state is not State.CLAIMED:
                        return _answer_repeat(outcome)
        except SessionStoreError as exc:
            raise to_mcp_error(exc, session_id) from exc
        return await self._execute(
            route, params, arguments, claimed, round_number, ttl, ctx, call_next
        )

    async def _run(self, operation: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """A claims operation over the store's backend and memory, traced, on its threads."""
        core = self.store.store
        traced_operation = traced(operation)
        return await self.store.run(traced_operation, core.backend, core.memory, *args, **kwargs)

    async def _claim(self, route: Route, name: str, arguments: dict[str, Any]) -> claims.Outcome:
        ttl = (
            route.checked.ttl
            if route.checked is not None
            else await self._session_ttl(route.session_id, route.owner)
        )
        outcome = await self._run(
            claims.claim,
            route.session_id,
            route.tool_call_id,
            name,
            arguments,
            owner=route.owner,
            ttl=ttl,
            lease_ms=self.lease_ms,
        )
        if outcome.state is State.CLAIMED and outcome.claim.ttl != ttl:
            self._remember(route.session_id, route.owner, outcome.claim.ttl)
        return outcome

    async def _execute(
        self,
        route: Route,
        params: CallToolRequestParams,
        arguments: dict[str, Any],
        claimed: claims.Claim | None,
        round_number: int,
        ttl: int,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        view = ToolSession(
            route.session_id, route.owner, route.tool_call_id, params.name, self.store
        )
        started = self.store.clock.now_ms()
        token = CURRENT_SESSION.set(view)
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            # The tool refused with a protocol error: that is its outcome, recorded as such.
            output: JSON = {"mcpError": exc.error.model_dump(mode="json", exclude_none=True)}
            await self._record(view, arguments, output, started, claimed, ttl)
            raise
        finally:
            CURRENT_SESSION.reset(token)
        if isinstance(result, InputRequiredResult):
            # Not finished: the next round carries the claim in the sealed requestState, and
            # the answer is kept for a client that lost it and sends this round again.
            suspended = rounds.suspend(result, claimed, round_number + 1)
            if claimed is not None:
                await self._keep_suspension(claimed, round_number, suspended)
            return suspended
        if isinstance(result, CallToolResult):
            # Without its per-response metadata, which is not part of the outcome.
            dumped = result.model_dump(
                mode="json", by_alias=True, exclude_none=True, exclude={"meta"}
            )
            output = {"callToolResult": dumped}
        else:
            output = {"unrecordable": type(result).__name__}
        await self._record(view, arguments, output, started, claimed, ttl)
        return result

    async def _keep_suspension(
        self, claimed: claims.Claim, round_number: int, answer: InputRequiredResult
    ) -> None:
        text = answer.model_dump_json(by_alias=True, exclude_none=True)
        try:
            await self._run(claims.suspend_round, claimed, round_number, text)
        except SessionStoreError as exc:
            # The round itself succeeded: only a re-send of it would miss the kept answer.
            logger.warning(
                "round %d of tool call %r: its answer could not be kept: %s",
                round_number,
                claimed.tool_call_id,
                exc,
            )

    async def _record(
        self,
        view: ToolSession,
        arguments: dict[str, Any],
        output: JSON,
        started: int,
        claimed: claims.Claim | None,
        ttl: int,
    ) -> None:
        duration = max(0, self.store.clock.now_ms() - started)
        sid, call_id = view.session_id, view.tool_call_id
        try:
            if claimed is not None:
                await self._run(claims.complete, sid, call_id, claimed, arguments, output, duration)
            else:
                await self._run(
                    claims.put_record,
                    sid,
                    call_id,
                    view.tool_name,
                    arguments,
                    output,
                    duration,
                    ttl=ttl,
                )
        except SessionStoreError as exc:
            error = to_mcp_error(exc, view.session_id)
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
