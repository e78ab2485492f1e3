"""The MCP conformance suite's fixtures, checked without Node: what the suite would call, served
over real HTTP on loopback with the SDK's own client (legacy handshake, as the suite's client).

``make conformance`` runs the suite itself; these tests keep the fixtures honest in ``make test``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from mcp import Client
from mcp_types import (
    BlobResourceContents,
    CreateMessageRequestParams,
    CreateMessageResult,
    EmbeddedResource,
    LoggingMessageNotificationParams,
    PromptReference,
    TextContent,
    TextResourceContents,
)

import sessionstore as ss
from sessionstore.conformance import fixtures as fx
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer, create_app, create_server
from tests.support.soak import scan_table

KEYS = ["test-request-state-key-0123456789abcdef"]
TIMEOUT = 30
_ENDPOINT_VARIABLES = ("SESSIONSTORE_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB")


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(TIMEOUT):
            return await main()

    return asyncio.run(bounded())


def _bare() -> Any:
    server = create_server(None, state_keys=KEYS)
    fx.add_conformance_fixtures(server)
    return server


def _text(result: Any) -> str:
    return str(result.content[0].text)


def test_the_store_backed_server_lists_every_fixture_and_records_each_call(
    engine: LocalDynamoDB, table: str
) -> None:
    store = ss.SessionStore(ss.connect(engine.endpoint_url), table)
    server = create_server(store, state_keys=KEYS)
    fx.add_conformance_fixtures(server)

    async def main() -> None:
        async with (
            RunningServer(create_app(server)) as running,
            Client(running.url, mode="legacy") as client,
        ):
            tools = {t.name: t for t in (await client.list_tools()).tools}
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            resources = {r.uri: r for r in (await client.list_resources()).resources}
            templates = (await client.list_resource_templates()).resource_templates
            assert set(fx.TOOLS) <= set(tools)
            assert set(fx.PROMPTS) <= set(prompts)
            assert set(fx.RESOURCES) <= set(resources)
            assert [t.uri_template for t in templates] == list(fx.RESOURCE_TEMPLATES)
            # tools-list and prompts-list fail on a missing description -- the demo's tools too.
            assert all(t.description for t in tools.values())
            assert all(p.description for p in prompts.values())
            assert tools["test_sampling"].input_schema["required"] == ["prompt"]
            args = {
                a.name: a.required for a in prompts["test_prompt_with_arguments"].arguments or []
            }
            assert args == {"arg1": True, "arg2": True}

            assert _text(await client.call_tool("test_simple_text")) == fx.SIMPLE_TEXT
            failed = await client.call_tool("test_error_handling", {})
            assert failed.is_error and fx.ERROR_TEXT in _text(failed)

    _run(main)
    # Through the store: the legacy handshake opened a session in the table, and both calls
    # were recorded in it, the failure included.
    items = scan_table(store.client, table)
    recorded = sorted(i["toolName"]["S"] for i in items if i["sk"]["S"].startswith("tool#"))
    assert recorded == ["test_error_handling", "test_simple_text"]
    assert any(i["sk"]["S"] == "metadata" for i in items)


# The suite exercises logging, which 2026-07-28 deprecates; the SDK says so on every use.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_fixtures_answer_what_the_suite_checks() -> None:
    logs: list[LoggingMessageNotificationParams] = []
    reported: list[tuple[float, float | None]] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, total))

    async def main() -> None:
        async with (
            RunningServer(create_app(_bare())) as running,
            Client(running.url, mode="legacy", logging_callback=on_log) as client,
        ):
            image = (await client.call_tool("test_image_content")).content[0]
            assert image.type == "image" and image.mime_type == "image/png"
            assert base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")
            audio = (await client.call_tool("test_audio_content")).content[0]
            assert audio.type == "audio" and audio.mime_type == "audio/wav"
            assert base64.b64decode(audio.data)[8:12] == b"WAVE"
            embedded = (await client.call_tool("test_embedded_resource")).content[0]
            assert embedded.type == "resource"
            assert embedded.resource.uri == "test://embedded-resource"
            assert embedded.resource.mime_type == "text/plain"
            mixed = (await client.call_tool("test_multiple_content_types")).content
            assert [c.type for c in mixed] == ["text", "image", "resource"]
            assert isinstance(mixed[2], EmbeddedResource)
            assert isinstance(mixed[2].resource, TextResourceContents)
            assert json.loads(mixed[2].resource.text) == {"test": "data", "value": 123}

            await client.call_tool("test_tool_with_logging")
            assert [(m.level, m.data) for m in logs] == [
                ("info", "Tool execution started"),
                ("info", "Tool processing data"),
                ("info", "Tool execution completed"),
            ]
            await client.call_tool("test_tool_with_progress", progress_callback=on_progress)
            assert reported == [(0, 100), (50, 100), (100, 100)]

            text = (await client.read_resource("test://static-text")).contents[0]
            assert isinstance(text, TextResourceContents)
            assert (text.mime_type, text.text) == ("text/plain", fx.STATIC_TEXT)
            blob = (await client.read_resource("test://static-binary")).contents[0]
            assert isinstance(blob, BlobResourceContents)
            assert blob.mime_type == "image/png" and blob.blob == fx.PNG_BASE64
            data = (await client.read_resource("test://template/123/data")).contents[0]
            assert isinstance(data, TextResourceContents)
            assert data.uri == "test://template/123/data"
            assert json.loads(data.text) == {
                "id": "123",
                "templateTest": True,
                "data": "Data for ID: 123",
            }

            prompt = await client.get_prompt(
                "test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"}
            )
            assert prompt.messages[0].content == TextContent(
                type="text", text="Prompt with arguments: arg1='hello', arg2='world'"
            )
            embedded_prompt = await client.get_prompt(
                "test_prompt_with_embedded_resource", {"resourceUri": "test://example-resource"}
            )
            assert embedded_prompt.messages[0].content.type == "resource"
            assert embedded_prompt.messages[0].content.resource.uri == "test://example-resource"
            with_image = await client.get_prompt("test_prompt_with_image")
            assert [m.content.type for m in with_image.messages] == ["image", "text"]

            completion = await client.complete(
                PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
                {"name": "arg1", "value": "par"},
            )
            assert completion.completion.values == ["paris", "park", "party"]
            assert (await client.set_logging_level("debug")).model_dump(exclude_none=True) == {}

    _run(main)


def test_sampling_and_elicitation_refuse_with_the_reason_instead_of_hanging() -> None:
    # Without the store a stateless transport has no back channel (with it: test_back_channel).
    asked: list[str] = []

    async def sample(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append("sampling")
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="hi"), model="test"
        )

    async def main() -> None:
        async with (
            RunningServer(create_app(_bare())) as running,
            Client(running.url, mode="legacy", sampling_callback=sample) as client,
        ):
            for name, arguments in [
                ("test_sampling", {"prompt": "Test prompt for sampling"}),
                ("test_elicitation", {"message": "Please provide your information"}),
                ("test_elicitation_sep1034_defaults", {}),
                ("test_elicitation_sep1330_enums", {}),
            ]:
                result = await client.call_tool(name, arguments)
                assert result.is_error, name
                assert "stateless server cannot send" in _text(result), name

    _run(main)
    assert asked == []


def test_a_bad_endpoint_is_one_line_on_stderr_and_exit_status_2() -> None:
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessionstore.mcp",
            "--endpoint-url",
            f"http://127.0.0.1:{closed_port}",
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k not in _ENDPOINT_VARIABLES},
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("python -m sessionstore.mcp: error: EndpointConnectionError: ")
    assert f"127.0.0.1:{closed_port}" in lines[0]
    assert done.stdout == ""


@pytest.mark.parametrize("argv", [["--port", "70000"], ["--host", "0.0.0.0"]])
def test_argument_errors_stay_argparse_errors(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sessionstore.mcp", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("python -m sessionstore.mcp: error: ")
