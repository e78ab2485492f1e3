"""The 2026-07-28 fixtures that ask the client through ``InputRequiredResult`` (SEP-2322): the
tools ``test_input_required_result_*``, ``test_missing_capability`` and the prompt
``test_input_required_result_prompt``.

Layer: the conformance server, under ``fixtures``, which registers these and names the client
capability each relies on. Why a module of its own: this is the 2026-07-28 way to ask the client
mid-call, with no request of the server's own. The tool answers ``InputRequiredResult`` and the
client retries the same call with ``inputResponses`` and the echoed ``requestState``. Nothing
waits in memory between rounds, so any instance serves any round: a tool call goes through the
store's interceptor like any other (claimed in a session, each later round taken once). Answers
of earlier rounds ride the state (the SDK seals it: tool, arguments and principal bound,
tampering refused with -32602), so a question answered once is not asked again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp_types import (
    CallToolResult,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .content import Ctx, _text

T = TypeVar("T")


def _elicit_request(message: str, field: str, kind: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _sampling_request(text: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return CreateMessageRequest(
        params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def _elicited(field: str, kind: type) -> Callable[[InputResponse], Any]:
    """The accepted form's ``field``; None (ask again) for anything else."""

    def read(response: InputResponse) -> Any:
        if not isinstance(response, ElicitResult):
            return None
        if response.action != "accept":
            return {"action": response.action}  # an answer all the same: no means no
        value = (response.content or {}).get(field)
        return {"action": "accept", field: value} if isinstance(value, kind) else None

    return read


def _sampled(response: InputResponse) -> Any:
    if not isinstance(response, CreateMessageResult):
        return None
    return response.content.text if isinstance(response.content, TextContent) else ""


def _roots(response: InputResponse) -> Any:
    return [str(r.uri) for r in response.roots] if isinstance(response, ListRootsResult) else None


_Question = tuple[InputRequest, Callable[[InputResponse], Any]]

_USER_NAME: _Question = (
    _elicit_request("What is your name?", "name", "string"),
    _elicited("name", str),
)
_CAPITAL: _Question = (_sampling_request("What is the capital of France?", 100), _sampled)
_GREETING: _Question = (_sampling_request("Generate a greeting", 50), _sampled)
_CLIENT_ROOTS: _Question = (ListRootsRequest(), _roots)
_CONFIRM: _Question = (_elicit_request("Please confirm", "ok", "boolean"), _elicited("ok", bool))
_STEP1: _Question = (
    _elicit_request("Step 1: What is your name?", "name", "string"),
    _elicited("name", str),
)
_STEP2: _Question = (
    _elicit_request("Step 2: What is your favorite color?", "color", "string"),
    _elicited("color", str),
)
_PROMPT_CONTEXT: _Question = (
    _elicit_request("What context should the prompt use?", "context", "string"),
    _elicited("context", str),
)

_STATE_KEY = "answers"


def _carried(ctx: Ctx) -> dict[str, Any] | None:
    """Earlier rounds' answers from this call's state; None when no state of ours came back."""
    try:
        state = json.loads(ctx.request_state) if ctx.request_state is not None else None
    except ValueError:
        return None
    answers = state.get(_STATE_KEY) if isinstance(state, dict) else None
    return answers if isinstance(answers, dict) else None


def _gather(ctx: Ctx, *rounds: dict[str, _Question]) -> dict[str, Any] | InputRequiredResult:
    """Every question's answer, or the next round to ask: the first round with a question still
    open. A missing, wrong-keyed or unusable response is asked again, not an error (SEP-2322
    recommends re-requesting); keys the tool did not ask are ignored."""
    answers = dict(_carried(ctx) or {})
    responses = ctx.input_responses or {}
    for questions in rounds:
        for key, (_, read) in questions.items():
            if key not in answers and key in responses:
                value = read(responses[key])
                if value is not None:
                    answers[key] = value
        pending = {key: request for key, (request, _) in questions.items() if key not in answers}
        if pending:
            state = json.dumps({_STATE_KEY: answers}, separators=(",", ":"))
            return InputRequiredResult(input_requests=pending, request_state=state)
    return answers


def _modern_only(ctx: Ctx) -> None:
    # A handshake-era request has no way to carry inputResponses back: its tools ask the client
    # with a server-to-client request instead (test_sampling, test_elicitation).
    if ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
        raise ToolError(
            "this tool asks the client through InputRequiredResult, which needs protocol "
            f"2026-07-28 (this request: {ctx.protocol_version})"
        )


def _said(answer: Any, field: str) -> str:
    return str(answer.get(field)) if answer.get("action") == "accept" else f"({answer['action']})"


def _ask(
    ctx: Ctx, answer: Callable[[dict[str, Any]], T], *rounds: dict[str, _Question]
) -> T | InputRequiredResult:
    """A multi-round-trip tool's body: ``answer(answers)`` once every round is answered, the
    next round to ask until then."""
    _modern_only(ctx)
    answers = _gather(ctx, *rounds)
    return answers if isinstance(answers, InputRequiredResult) else answer(answers)


async def input_required_elicitation(ctx: Ctx) -> CallToolResult | InputRequiredResult:
    """Asks the user's name through InputRequiredResult (elicitation), then greets them."""
    greet = lambda a: _text(f"Hello, {_said(a['user_name'], 'name')}!")  # noqa: E731
    return _ask(ctx, greet, {"user_name": _USER_NAME})


async def input_required_sampling(ctx: Ctx) -> CallToolResult | InputRequiredResult:
    """Asks the client's LLM a question through InputRequiredResult (sampling)."""
    reply = lambda a: _text(f"LLM response: {a['capital_question']}")  # noqa: E731
    return _ask(ctx, reply, {"capital_question": _CAPITAL})


async def input_required_list_roots(ctx: Ctx) -> CallToolResult | InputRequiredResult:
    """Asks the client's roots through InputRequiredResult (roots/list)."""
    roots = lambda a: _text(f"Client roots: {', '.join(a['client_roots']) or '(none)'}")  # noqa: E731
    return _ask(ctx, roots, {"client_roots": _CLIENT_ROOTS})


async def input_required_request_state(ctx: Ctx) -> CallToolResult | InputRequiredResult:
    """Asks for a confirmation; completes only with the requestState it issued echoed back."""
    _modern_only(ctx)
    if _carried(ctx) is None:  # no state of ours: round 1, whatever responses came along
        return InputRequiredResult(
            input_requests={"confirm": _CONFIRM[0]},
            request_state=json.dumps({_STATE_KEY: {}}, separators=(",", ":")),
        )
    confirmed = lambda a: _text(f"state-ok: confirmed={_said(a['confirm'], 'ok')}")  # noqa: E731
    return _ask(ctx, confirmed, {"confirm": _CONFIRM})


def _three(answers: dict[str, Any]) -> CallToolResult:
    name, roots = _said(answers["user_name"], "name"), ", ".join(answers["client_roots"])
    return _text(f"name={name}; greeting={answers['greeting']}; roots={roots or '(none)'}")


async def input_required_multiple_inputs(ctx: Ctx) -> CallToolResult | InputRequiredResult:
    """Asks three things at once: a name (elicitation), a greeting (sampling) and the roots."""
    questions = {"user_name": _USER_NAME, "greeting": _GREETING, "client_roots": _CLIENT_ROOTS}
    return _ask(ctx, _three, questions)


def _favourite(answers: dict[str, Any]) -> CallToolResult:
    name, color = _said(answers["step1"], "name"), _said(answers["step2"], "color")
    return _text(f"{name}'s favorite color is {color}")


async def input_required_multi_round(ctx: Ctx) -> CallToolResult | InputRequiredResult:
    """Asks a name, then (a second round, new requestState) a favourite colour."""
    return _ask(ctx, _favourite, {"step1": _STEP1}, {"step2": _STEP2})


async def input_required_tampered_state(ctx: Ctx) -> CallToolResult | InputRequiredResult:
    """Asks for a confirmation with a sealed requestState; a tampered one never reaches it."""
    return await input_required_request_state(ctx)


_BY_CAPABILITY: tuple[tuple[str, str, _Question], ...] = (
    ("elicitation", "user_name", _USER_NAME),
    ("sampling", "greeting", _GREETING),
    ("roots", "client_roots", _CLIENT_ROOTS),
)


async def input_required_capabilities(ctx: Ctx) -> CallToolResult | InputRequiredResult:
    """Asks only through the capabilities this request's client declared."""
    _modern_only(ctx)
    declared = ctx.client_capabilities or ClientCapabilities()
    questions = {key: q for cap, key, q in _BY_CAPABILITY if getattr(declared, cap) is not None}
    if not questions:
        return _text("nothing to ask: the client declared none of elicitation, sampling, roots")
    return _ask(ctx, lambda a: _text(f"answered: {', '.join(sorted(a))}"), questions)


async def missing_capability(ctx: Ctx) -> CallToolResult | InputRequiredResult:
    """Needs the client's sampling capability: refused with -32021 when it is not declared."""
    return await input_required_sampling(ctx)


async def input_required_prompt(ctx: Ctx) -> list[Message] | InputRequiredResult:
    """A prompt that asks the client for context first (InputRequiredResult on prompts/get)."""

    def prompt(answers: dict[str, Any]) -> list[Message]:
        context = _said(answers["user_context"], "context")
        return [UserMessage(f"Answer with this context in mind: {context}")]

    return _ask(ctx, prompt, {"user_context": _PROMPT_CONTEXT})
