"""The fixtures of the MCP conformance suite, served by the store-backed server.

``make conformance`` runs ``@modelcontextprotocol/conformance`` (README) against ``python -m
sessionstore.mcp --conformance``, which adds these to the demo server: the suite measures this
package, not a bare SDK. It calls fixtures by name (``test_simple_text``, ``test://static-text``
...); names, arguments and payloads follow its scenarios and its reference server
(``examples/servers/typescript/everything-server.ts``).

What a stateless, multi-instance server cannot pass, whatever the store does:

* ``tools-call-sampling``, ``tools-call-elicitation``, ``elicitation-sep1034-defaults``,
  ``elicitation-sep1330-enums`` -- each needs a server-to-client *request* in the middle of a
  ``tools/call``, with no back channel on a stateless transport (README, "An MCP server on the
  store"). The tools here refuse with a clear ``isError`` result instead of hanging.
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
from typing import Annotated, Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.shared.exceptions import NoBackChannelError
from mcp_types import (
    AudioContent,
    CallToolResult,
    ClientCapabilities,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    ElicitationCapability,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    PromptReference,
    RequestParams,
    SamplingCapability,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import Field

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

PROMPTS = (
    "test_simple_prompt",
    "test_prompt_with_arguments",
    "test_prompt_with_embedded_resource",
    "test_prompt_with_image",
)
RESOURCES = ("test://static-text", "test://static-binary", "test://watched-resource")
RESOURCE_TEMPLATES = ("test://template/{id}/data",)

# The SDK injects the context into the parameter annotated with (a subclass of) Context.
Ctx = Context[Any, Any]

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
    _require_back_channel(ctx, "sampling", ClientCapabilities(sampling=SamplingCapability()))
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    try:
        result = await ctx.session.create_message(
            [message], max_tokens=100, related_request_id=ctx.request_id
        )
    except NoBackChannelError as exc:
        raise ToolError(f"sampling is not possible on this connection: {exc}") from exc
    reply = result.content.text if isinstance(result.content, TextContent) else "No response"
    return _text(f"LLM response: {reply}")


async def _elicit(ctx: Ctx, message: str, schema: dict[str, Any], label: str) -> CallToolResult:
    _require_back_channel(
        ctx, "elicitation", ClientCapabilities(elicitation=ElicitationCapability())
    )
    try:
        result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    except NoBackChannelError as exc:
        raise ToolError(f"elicitation is not possible on this connection: {exc}") from exc
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


_TOOLS: dict[str, Callable[..., Awaitable[CallToolResult]]] = {
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
}
#: Tool names, in the order the suite's scenarios use them.
TOOLS = tuple(_TOOLS)


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

    @server.resource(
        "test://static-text",
        name="static-text",
        title="Static Text Resource",
        description="A static text resource for testing",
        mime_type="text/plain",
    )
    async def static_text() -> str:
        return STATIC_TEXT

    @server.resource(
        "test://static-binary",
        name="static-binary",
        title="Static Binary Resource",
        description="A static binary resource (image) for testing",
        mime_type="image/png",
    )
    async def static_binary() -> bytes:
        return base64.b64decode(PNG_BASE64)

    @server.resource(
        "test://template/{id}/data",
        name="template",
        title="Resource Template",
        description="A resource template with parameter substitution",
        mime_type="application/json",
    )
    async def template(id: str) -> str:
        return json.dumps(
            {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":")
        )

    @server.resource(
        "test://watched-resource",
        name="watched-resource",
        title="Watched Resource",
        description="A resource clients may subscribe to (it never changes here)",
        mime_type="text/plain",
    )
    async def watched() -> str:
        return WATCHED_TEXT

    @server.prompt(
        "test_simple_prompt",
        title="Simple Test Prompt",
        description="A simple prompt without arguments",
    )
    async def simple() -> list[Message]:
        return [UserMessage("This is a simple prompt for testing.")]

    @server.prompt(
        "test_prompt_with_arguments",
        title="Prompt With Arguments",
        description="A prompt with required arguments",
    )
    async def with_arguments(
        arg1: Annotated[str, Field(description="First test argument")],
        arg2: Annotated[str, Field(description="Second test argument")],
    ) -> list[Message]:
        return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]

    @server.prompt(
        "test_prompt_with_embedded_resource",
        title="Prompt With Embedded Resource",
        description="A prompt that includes an embedded resource",
    )
    async def with_embedded_resource(
        resourceUri: Annotated[str, Field(description="URI of the resource to embed")],
    ) -> list[Message]:
        embedded = _embedded(resourceUri, "text/plain", "Embedded resource content for testing.")
        return [UserMessage(embedded), UserMessage("Please process the embedded resource above.")]

    @server.prompt(
        "test_prompt_with_image",
        title="Prompt With Image",
        description="A prompt that includes image content",
    )
    async def with_image() -> list[Message]:
        return [UserMessage(_image()), UserMessage("Please analyze the image above.")]

    # No public MCPServer seam for these in 2.3.0; binding them here also advertises the
    # logging, resources.subscribe and completions capabilities the suite's client expects.
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, _accept)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, _accept)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _accept)
    lowlevel.add_request_handler("completion/complete", CompleteRequestParams, _complete)
