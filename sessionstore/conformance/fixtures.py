"""The fixtures of the MCP conformance suite, served by the store-backed server.

``make conformance`` runs ``@modelcontextprotocol/conformance`` (README) against ``python -m
sessionstore.conformance``, which adds these to the demo server: the suite measures this
package, not a bare SDK. It calls fixtures by name (``test_simple_text``, ``test://static-text``
...); names, arguments and payloads follow its scenarios and its reference server
(``examples/servers/typescript/everything-server.ts``).

The 2026-07-28 fixtures ask the client through ``InputRequiredResult`` (SEP-2322): the tools
``test_input_required_result_*`` and the prompt ``test_input_required_result_prompt``. Nothing
waits in memory between rounds, so they pass on any number of instances; a tool call goes
through the store's interceptor like any other (claimed in a session, each later round taken
once). Each tool names the client capability it relies on (``capabilities``), so a request whose
client did not declare it is refused with ``-32021`` before anything is claimed (SEP-2575, the
suite's diagnostic tool ``test_missing_capability``).

The 2025-11-25 fixtures ``test_sampling`` and ``test_elicitation*`` send the client a request in
the middle of a ``tools/call``. In a session kept in the table, the answer comes back through the
table to whichever instance waits for it (``sessionstore.mcp.back_channel``). A server without the
store has no back channel on its stateless transport: the tools refuse with a clear ``isError``
result instead of hanging, and so does a wait that ends without an answer.

What no fixture here covers:

* Pending in the suite, not run: ``server-sse-polling`` (an SSE stream resumed from an
  ``EventStore`` keyed by a live transport) and ``json-schema-2020-12`` (a hand-written input
  schema; ``MCPServer`` derives it from the signature); neither fixture is registered.

What passes only because the fixtures are static: ``resources/subscribe`` is accepted and
forgotten (the watched resource never changes, so no update is ever owed; a changing one would
need the subscription in the table and a channel to the client), and ``logging/setLevel`` is
accepted and not kept (on handshake versions the SDK sends every level anyway).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import (
    AudioContent,
    CallToolResult,
    ClientCapabilities,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitationCapability,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    PromptReference,
    RequestParams,
    RootsCapability,
    SamplingCapability,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import Field

from ..mcp.capabilities import require_client_capabilities

#: A 1x1 PNG and a one-sample WAV (the reference server's): the suite checks type and mime type.
PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg"
    "=="
)
WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

SIMPLE_TEXT = "This is a simple text response for testing."
ERROR_TEXT = "This tool intentionally returns an error for testing"
STATIC_TEXT = "This is the content of the static text resource."
WATCHED_TEXT = "Watched resource content"

# The SDK injects the context into the parameter annotated with (a subclass of) Context.
Ctx = Context[Any, Any]
T = TypeVar("T")

_ELICITATION = ClientCapabilities(elicitation=ElicitationCapability())
_SAMPLING = ClientCapabilities(sampling=SamplingCapability())

# The suite's scenarios pause ~50 ms between notifications so that a client sees them arrive
# one by one during the call, not batched with the result.
_STEP_SECONDS = 0.05


def _text(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


def _image() -> ImageContent:
    return ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")


def _embedded(uri: str, mime_type: str, text: str) -> EmbeddedResource:
    resource = TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    return EmbeddedResource(type="resource", resource=resource)


async def simple_text() -> CallToolResult:
    """Tests simple text content response."""
    return _text(SIMPLE_TEXT)


async def image_content() -> CallToolResult:
    """Tests image content response."""
    return CallToolResult(content=[_image()])


async def audio_content() -> CallToolResult:
    """Tests audio content response."""
    return CallToolResult(
        content=[AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")]
    )


async def embedded_resource() -> CallToolResult:
    """Tests embedded resource content response."""
    text = "This is an embedded resource content."
    return CallToolResult(content=[_embedded("test://embedded-resource", "text/plain", text)])


async def multiple_content_types() -> CallToolResult:
    """Tests response with multiple content types (text, image, resource)."""
    data = json.dumps({"test": "data", "value": 123}, separators=(",", ":"))
    return CallToolResult(
        content=[
            TextContent(type="text", text="Multiple content types test:"),
            _image(),
            _embedded("test://mixed-content-resource", "application/json", data),
        ]
    )


async def tool_with_logging(ctx: Ctx) -> CallToolResult:
    """Tests tool that emits log messages during execution."""
    # ctx.log ties each message to this request, so on the stateless transport it rides this
    # POST's SSE stream -- the one channel that reaches the client from any instance.
    for i, message in enumerate(
        ("Tool execution started", "Tool processing data", "Tool execution completed")
    ):
        if i:
            await asyncio.sleep(_STEP_SECONDS)
        await ctx.log("info", message, logger_name="conformance")
    return _text("Tool with logging executed successfully")


async def tool_with_progress(ctx: Ctx) -> CallToolResult:
    """Tests tool that reports progress notifications."""
    # A no-op when the request carries no progressToken, as the suite allows.
    for i, progress in enumerate((0, 50, 100)):
        if i:
            await asyncio.sleep(_STEP_SECONDS)
        await ctx.report_progress(progress, 100, f"Completed step {progress} of 100")
    return _text("Tool with progress executed successfully")


async def error_handling() -> CallToolResult:
    """Tests error response handling."""
    raise ToolError(ERROR_TEXT)


def _require_back_channel(ctx: Ctx, what: str, capability: ClientCapabilities) -> None:
    # Refuse before sending: a request that cannot be answered would only surface later as a
    # transport error, and the client would see a failed call with no reason.
    if not ctx.session.can_send_request:
        raise ToolError(
            f"{what} needs a server-to-client request, which a stateless server cannot send: "
            "the client's answer has no connection to come back to (NoBackChannelError)"
        )
    if not ctx.session.check_client_capability(capability):
        raise ToolError(f"the client did not declare the {what} capability")


async def sampling(
    prompt: Annotated[str, Field(description="The prompt to send to the LLM")], ctx: Context
) -> CallToolResult:
    """Tests server-initiated sampling (LLM completion request)."""
    _require_back_channel(ctx, "sampling", _SAMPLING)
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    try:
        result = await ctx.session.create_message(
            [message], max_tokens=100, related_request_id=ctx.request_id
        )
    except NoBackChannelError as exc:
        raise ToolError(f"sampling is not possible on this connection: {exc}") from exc
    except MCPError as exc:  # no answer in time, the session ended, the client refused
        raise ToolError(f"sampling failed: {exc}") from exc
    reply = result.content.text if isinstance(result.content, TextContent) else "No response"
    return _text(f"LLM response: {reply}")


async def _elicit(ctx: Ctx, message: str, schema: dict[str, Any], label: str) -> CallToolResult:
    _require_back_channel(ctx, "elicitation", _ELICITATION)
    try:
        result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    except NoBackChannelError as exc:
        raise ToolError(f"elicitation is not possible on this connection: {exc}") from exc
    except MCPError as exc:
        raise ToolError(f"elicitation failed: {exc}") from exc
    return _text(f"{label}: action={result.action}, content={json.dumps(result.content or {})}")


_USER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

_DEFAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}

_ENUMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Select one option",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
    "required": [],
}


async def elicitation(
    message: Annotated[str, Field(description="The message to show the user")], ctx: Context
) -> CallToolResult:
    """Tests server-initiated elicitation (user input request)."""
    return await _elicit(ctx, message, _USER_SCHEMA, "User response")


async def elicitation_sep1034_defaults(ctx: Ctx) -> CallToolResult:
    """Tests elicitation with default values per SEP-1034."""
    message = "Please review and update the form fields with defaults"
    return await _elicit(ctx, message, _DEFAULTS_SCHEMA, "Elicitation completed")


async def elicitation_sep1330_enums(ctx: Ctx) -> CallToolResult:
    """Tests elicitation with enum schema improvements per SEP-1330."""
    message = "Please select options from the enum fields"
    return await _elicit(ctx, message, _ENUMS_SCHEMA, "Elicitation completed")


# --------------------------------------------------------------------------- multi-round-trip
# The 2026-07-28 way to ask the client mid-call (SEP-2322): the tool answers InputRequiredResult
# and the client retries the same call with inputResponses and the echoed requestState. Nothing
# waits in memory, so any instance serves any round. Answers of earlier rounds ride the state
# (the SDK seals it: tool, arguments and principal bound, tampering refused with -32602), so a
# question answered once is not asked again.


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


#: The capability each multi-round-trip tool relies on (checked by ``capabilities``, -32021).
_NEEDS: dict[str, ClientCapabilities] = {
    "test_input_required_result_elicitation": _ELICITATION,
    "test_input_required_result_sampling": _SAMPLING,
    "test_input_required_result_list_roots": ClientCapabilities(roots=RootsCapability()),
    "test_input_required_result_request_state": _ELICITATION,
    "test_input_required_result_multiple_inputs": ClientCapabilities(
        elicitation=ElicitationCapability(),
        sampling=SamplingCapability(),
        roots=RootsCapability(),
    ),
    "test_input_required_result_multi_round": _ELICITATION,
    "test_input_required_result_tampered_state": _ELICITATION,
    "test_missing_capability": _SAMPLING,
}


async def input_required_prompt(ctx: Ctx) -> list[Message] | InputRequiredResult:
    """A prompt that asks the client for context first (InputRequiredResult on prompts/get)."""

    def prompt(answers: dict[str, Any]) -> list[Message]:
        context = _said(answers["user_context"], "context")
        return [UserMessage(f"Answer with this context in mind: {context}")]

    return _ask(ctx, prompt, {"user_context": _PROMPT_CONTEXT})


_TOOLS: dict[str, Callable[..., Awaitable[CallToolResult | InputRequiredResult]]] = {
    "test_simple_text": simple_text,
    "test_image_content": image_content,
    "test_audio_content": audio_content,
    "test_embedded_resource": embedded_resource,
    "test_multiple_content_types": multiple_content_types,
    "test_tool_with_logging": tool_with_logging,
    "test_tool_with_progress": tool_with_progress,
    "test_error_handling": error_handling,
    "test_sampling": sampling,
    "test_elicitation": elicitation,
    "test_elicitation_sep1034_defaults": elicitation_sep1034_defaults,
    "test_elicitation_sep1330_enums": elicitation_sep1330_enums,
    "test_input_required_result_elicitation": input_required_elicitation,
    "test_input_required_result_sampling": input_required_sampling,
    "test_input_required_result_list_roots": input_required_list_roots,
    "test_input_required_result_request_state": input_required_request_state,
    "test_input_required_result_multiple_inputs": input_required_multiple_inputs,
    "test_input_required_result_multi_round": input_required_multi_round,
    "test_input_required_result_tampered_state": input_required_tampered_state,
    "test_input_required_result_capabilities": input_required_capabilities,
    "test_missing_capability": missing_capability,
}
#: Tool names, in the order the suite's scenarios use them.
TOOLS = tuple(_TOOLS)


# --------------------------------------------------------------------------- resources, prompts


async def static_text() -> str:
    return STATIC_TEXT


async def static_binary() -> bytes:
    return base64.b64decode(PNG_BASE64)


async def template(id: str) -> str:
    data = {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}
    return json.dumps(data, separators=(",", ":"))


async def watched() -> str:
    return WATCHED_TEXT


#: uri: (name, title, description, mime type, the read), as the suite's scenarios name them.
_RESOURCES: dict[str, tuple[str, str, str, str, Callable[..., Awaitable[str | bytes]]]] = {
    "test://static-text": (
        "static-text",
        "Static Text Resource",
        "A static text resource for testing",
        "text/plain",
        static_text,
    ),
    "test://static-binary": (
        "static-binary",
        "Static Binary Resource",
        "A static binary resource (image) for testing",
        "image/png",
        static_binary,
    ),
    "test://template/{id}/data": (
        "template",
        "Resource Template",
        "A resource template with parameter substitution",
        "application/json",
        template,
    ),
    "test://watched-resource": (
        "watched-resource",
        "Watched Resource",
        "A resource clients may subscribe to (it never changes here)",
        "text/plain",
        watched,
    ),
}


async def simple_prompt() -> list[Message]:
    return [UserMessage("This is a simple prompt for testing.")]


async def prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> list[Message]:
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


async def prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],
) -> list[Message]:
    embedded = _embedded(resourceUri, "text/plain", "Embedded resource content for testing.")
    return [UserMessage(embedded), UserMessage("Please process the embedded resource above.")]


async def prompt_with_image() -> list[Message]:
    return [UserMessage(_image()), UserMessage("Please analyze the image above.")]


#: name: (title, description, the prompt).
_PROMPTS: dict[str, tuple[str, str, Callable[..., Awaitable[Any]]]] = {
    "test_simple_prompt": (
        "Simple Test Prompt",
        "A simple prompt without arguments",
        simple_prompt,
    ),
    "test_prompt_with_arguments": (
        "Prompt With Arguments",
        "A prompt with required arguments",
        prompt_with_arguments,
    ),
    "test_prompt_with_embedded_resource": (
        "Prompt With Embedded Resource",
        "A prompt that includes an embedded resource",
        prompt_with_embedded_resource,
    ),
    "test_prompt_with_image": (
        "Prompt With Image",
        "A prompt that includes image content",
        prompt_with_image,
    ),
    "test_input_required_result_prompt": (
        "Prompt Asking For Input",
        "A prompt that asks the client for context first (2026-07-28)",
        input_required_prompt,
    ),
}
PROMPTS = tuple(_PROMPTS)
RESOURCES = tuple(uri for uri in _RESOURCES if "{" not in uri)
RESOURCE_TEMPLATES = tuple(uri for uri in _RESOURCES if "{" in uri)


_COMPLETIONS = {"arg1": ["paris", "park", "party"], "arg2": ["hello", "world"]}


async def _accept(ctx: ServerRequestContext[Any], params: RequestParams) -> EmptyResult:
    # Accepted and not kept: the module docstring says why nothing needs remembering.
    return EmptyResult()


async def _complete(
    ctx: ServerRequestContext[Any], params: CompleteRequestParams
) -> CompleteResult:
    ref = params.ref
    ours = isinstance(ref, PromptReference) and ref.name == "test_prompt_with_arguments"
    candidates = _COMPLETIONS.get(params.argument.name, []) if ours else []
    values = [v for v in candidates if v.startswith(params.argument.value)]
    return CompleteResult(completion=Completion(values=values, total=len(values), has_more=False))


def add_conformance_fixtures(server: MCPServer) -> None:
    """Register the suite's fixture tools, prompts, resources, templates and utility methods."""
    # Registered under the suite's names; the functions drop the ``test_`` prefix so that no
    # test runner mistakes them for tests.
    for name, fn in _TOOLS.items():
        server.add_tool(fn, name=name)
        if name in _NEEDS:
            require_client_capabilities(server, name, _NEEDS[name])

    for uri, (name, title, description, mime_type, read) in _RESOURCES.items():
        server.resource(uri, name=name, title=title, description=description, mime_type=mime_type)(
            read
        )
    for name, (title, description, prompt) in _PROMPTS.items():
        server.prompt(name, title=title, description=description)(prompt)

    # No public MCPServer seam for these in 2.3.0; binding them here also advertises the
    # logging, resources.subscribe and completions capabilities the suite's client expects.
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, _accept)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, _accept)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _accept)
    lowlevel.add_request_handler("completion/complete", CompleteRequestParams, _complete)
