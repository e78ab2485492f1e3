"""The fixtures of the MCP conformance suite, served by the store-backed server: their tables and
the one call that registers them.

``make conformance`` runs ``@modelcontextprotocol/conformance`` (README) against ``python -m
sessionstore.conformance``, which adds these to the demo server: the suite measures this
package, not a bare SDK. It calls fixtures by name (``test_simple_text``, ``test://static-text``
...); names, arguments and payloads follow its scenarios and its reference server
(``examples/servers/typescript/everything-server.ts``).

Layer: the conformance server, over the demo server. The fixtures live by what they serve:
``content`` (a tool for each kind of content, the resources, the prompts), ``mid_call`` (the
2025-11-25 requests to the client in the middle of a call) and ``input_required`` (the
2026-07-28 ``InputRequiredResult`` rounds). This module holds the tables the suite's names are
read from, the utility methods and ``add_conformance_fixtures``. Each multi-round-trip tool names
the client capability it relies on (``_NEEDS``), so a request whose client did not declare it is
refused with ``-32021`` before anything is claimed (SEP-2575, the suite's diagnostic tool
``test_missing_capability``).

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

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    CallToolResult,
    ClientCapabilities,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    ElicitationCapability,
    EmptyResult,
    InputRequiredResult,
    PromptReference,
    RequestParams,
    RootsCapability,
    SamplingCapability,
    SetLevelRequestParams,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)

from ..mcp.capabilities import require_client_capabilities
from .content import (
    _ELICITATION,
    _SAMPLING,
    audio_content,
    embedded_resource,
    error_handling,
    image_content,
    multiple_content_types,
    prompt_with_arguments,
    prompt_with_embedded_resource,
    prompt_with_image,
    simple_prompt,
    simple_text,
    static_binary,
    static_text,
    template,
    tool_with_logging,
    tool_with_progress,
    watched,
)

# The payloads the tests and benchmarks compare against (``fixtures as fx``), read from here.
from .content import ERROR_TEXT as ERROR_TEXT
from .content import PNG_BASE64 as PNG_BASE64
from .content import SIMPLE_TEXT as SIMPLE_TEXT
from .content import STATIC_TEXT as STATIC_TEXT
from .input_required import (
    input_required_capabilities,
    input_required_elicitation,
    input_required_list_roots,
    input_required_multi_round,
    input_required_multiple_inputs,
    input_required_prompt,
    input_required_request_state,
    input_required_sampling,
    input_required_tampered_state,
    missing_capability,
)
from .mid_call import (
    elicitation,
    elicitation_sep1034_defaults,
    elicitation_sep1330_enums,
    sampling,
)

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
