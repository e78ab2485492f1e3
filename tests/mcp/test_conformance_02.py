"""The 2026-07-28 conformance fixtures (suite 0.2), checked without Node: the multi-round-trip
tools and prompt answered by the SDK's own ``Client``, which fulfils each ``InputRequiredResult``
through its callbacks and retries, over real HTTP on loopback, in a store session -- so every
round goes through the claim -- and the SEP-2575 capability check, refused before any claim.

``make conformance`` runs the suite itself; these keep the fixtures honest in ``make test``.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
    Root,
    TextContent,
)

import sessionstore as ss
from sessionstore.conformance import fixtures as fx
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer, create_app, create_server, open_session
from sessionstore.mcp.protocol import SESSION_ID_KEY
from tests.mcp.test_mcp_conformance_fixtures import KEYS, _run, _text
from tests.support.soak import scan_table

ANSWERS = {"name": "Alice", "color": "blue", "ok": True, "context": "a test"}


async def _elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
    # Whatever the form asks, from the one table of answers (the suite answers the same way).
    wanted = getattr(params, "requested_schema", {}).get("properties", {})
    return ElicitResult(action="accept", content={k: ANSWERS[k] for k in wanted})


async def _sample(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
    text = "Paris" if "capital" in str(params.messages[0].content) else "Hello there!"
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text=text), model="test-model"
    )


async def _roots(context: Any) -> ListRootsResult:
    return ListRootsResult(roots=[Root(uri="file:///test/root", name="Test Root")])


def _server(engine: LocalDynamoDB, table: str) -> tuple[ss.SessionStore, Any]:
    store = ss.SessionStore(ss.connect(engine.endpoint_url), table)
    server = create_server(store, state_keys=KEYS)
    fx.add_conformance_fixtures(server)
    return store, server


def _recorded(store: ss.SessionStore, table: str) -> list[str]:
    items = scan_table(store.client, table)
    return sorted(i["toolName"]["S"] for i in items if i["sk"]["S"].startswith("tool#"))


def test_the_client_answers_each_round_and_each_call_is_claimed_once(
    engine: LocalDynamoDB, table: str
) -> None:
    store, server = _server(engine, table)
    expected = {
        "test_input_required_result_elicitation": "Hello, Alice!",
        "test_input_required_result_sampling": "LLM response: Paris",
        "test_input_required_result_list_roots": "Client roots: file:///test/root",
        "test_input_required_result_request_state": "state-ok: confirmed=True",
        "test_input_required_result_multiple_inputs": (
            "name=Alice; greeting=Hello there!; roots=file:///test/root"
        ),
        "test_input_required_result_multi_round": "Alice's favorite color is blue",
        "test_input_required_result_capabilities": "answered: client_roots, greeting, user_name",
        "test_missing_capability": "LLM response: Paris",
    }

    async def main() -> None:
        async with (
            RunningServer(create_app(server)) as running,
            Client(
                running.url,
                elicitation_callback=_elicit,
                sampling_callback=_sample,
                list_roots_callback=_roots,
            ) as client,
        ):
            meta = {SESSION_ID_KEY: (await open_session(client)).session_id}
            for name, text in expected.items():
                assert _text(await client.call_tool(name, {}, meta=meta)) == text, name
            prompt = await client.get_prompt("test_input_required_result_prompt")
            assert "a test" in str(prompt.messages[0].content)

            # Round by round: the multi-round tool asks one thing per round, each under a new
            # sealed requestState, and later answers are not asked again.
            session = client.session
            name = "test_input_required_result_multi_round"
            first = await session.call_tool(name, {}, meta=meta, allow_input_required=True)
            assert isinstance(first, InputRequiredResult)
            assert list(first.input_requests or {}) == ["step1"]
            second = await session.call_tool(
                name,
                {},
                meta=meta,
                input_responses={"step1": ElicitResult(action="accept", content={"name": "Bo"})},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(second, InputRequiredResult)
            assert list(second.input_requests or {}) == ["step2"]
            assert second.request_state != first.request_state

    _run(main)
    # Every call in the session was claimed and recorded once, however many rounds it took.
    assert _recorded(store, table) == sorted([*expected, "test_input_required_result_multi_round"])


def test_what_the_suite_sends_wrong_is_asked_again_or_refused(
    engine: LocalDynamoDB, table: str
) -> None:
    _, server = _server(engine, table)
    name = "test_input_required_result_tampered_state"

    async def main() -> None:
        async with (
            RunningServer(create_app(server)) as running,
            Client(running.url, elicitation_callback=_elicit) as client,
        ):
            session = client.session
            # A response under a key the tool did not ask: asked again, not an error.
            wrong = {"wrong_key": ElicitResult(action="accept", content={"data": "x"})}
            again = await session.call_tool(
                "test_input_required_result_elicitation",
                {},
                input_responses=wrong,
                allow_input_required=True,
            )
            assert isinstance(again, InputRequiredResult)
            assert list(again.input_requests or {}) == ["user_name"]
            # A tampered requestState never reaches the tool: the SDK's seal refuses it.
            first = await session.call_tool(name, {}, allow_input_required=True)
            assert isinstance(first, InputRequiredResult) and first.request_state
            confirm = {"confirm": ElicitResult(action="accept", content={"ok": True})}
            with pytest.raises(MCPError) as tampered:
                await session.call_tool(
                    name,
                    {},
                    input_responses=confirm,
                    request_state=first.request_state + "-TAMPERED",
                )
            assert tampered.value.code == INVALID_PARAMS

    _run(main)


def test_an_undeclared_capability_is_refused_before_anything_is_claimed(
    engine: LocalDynamoDB, table: str
) -> None:
    """SEP-2575: the client declared elicitation only; the sampling tool answers -32021 naming
    ``sampling``, in a session, and leaves no call in the table; the capabilities tool asks
    only what was declared."""
    store, server = _server(engine, table)

    async def main() -> None:
        async with (
            RunningServer(create_app(server)) as running,
            Client(running.url, elicitation_callback=_elicit) as client,
        ):
            meta = {SESSION_ID_KEY: (await open_session(client)).session_id}
            for name in ("test_missing_capability", "test_input_required_result_sampling"):
                with pytest.raises(MCPError) as refused:
                    await client.call_tool(name, {}, meta=meta)
                assert refused.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
                assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}
            asked = await client.session.call_tool(
                "test_input_required_result_capabilities", {}, allow_input_required=True
            )
            assert isinstance(asked, InputRequiredResult)
            assert [r.method for r in (asked.input_requests or {}).values()] == [
                "elicitation/create"
            ]

    _run(main)
    assert _recorded(store, table) == []
