"""The conformance suite's content fixtures: a tool for each kind of content, the resources and
the prompts, with the constants and helpers the other fixture modules share (``Ctx``, ``_text``).

Layer: the conformance server, under ``fixtures``, which registers these under the suite's names;
nothing here knows the store or the MCP extension. Why a module of its own: these answer in one
step, from constants (the suite checks what comes back: text, image, audio, an embedded
resource, log and progress notifications on the call's stream), while the fixtures that ask the
client something mid-call (``mid_call``, ``input_required``) build on the helpers here.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp_types import (
    AudioContent,
    CallToolResult,
    ClientCapabilities,
    ElicitationCapability,
    EmbeddedResource,
    ImageContent,
    SamplingCapability,
    TextContent,
    TextResourceContents,
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

# The SDK injects the context into the parameter annotated with (a subclass of) Context.
Ctx = Context[Any, Any]

#: The capabilities the tools that ask the client rely on (``mid_call`` checks them before asking).
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
