"""The cheat sheet's plain boto3 snippets (docs/cheatsheet.md) do what the page says, pasted as
they are, in order, on the embedded engine; and the book's reference pages are linked.

Only two things are injected: ``boto3.client`` returns the test's client, and ``TABLE`` names
the test's table. Each snippet is then judged by the items it leaves -- and run again where the
page says what its refusal returns (a missing session, a stale version, a repeated call, a
closed session).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import boto3
import pytest

import sessionstore as ss
from sessionstore.testing.hooks import Hooks

ROOT = Path(__file__).resolve().parents[2]
SHEET = ROOT / "docs" / "cheatsheet.md"
PYTHON = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
SETUP_TABLE = 'TABLE = "mcp-sessions"\n'


def _snippets() -> list[str]:
    return PYTHON.findall(SHEET.read_text())


def _item(client: Any, table: str, sk: str, sid: str = "s-0001") -> dict[str, Any] | None:
    key = {"pk": {"S": f"session#{sid}"}, "sk": {"S": sk}}
    item: dict[str, Any] | None = client.get_item(
        TableName=table, Key=key, ConsistentRead=True
    ).get("Item")
    return item


def test_the_cheat_sheets_snippets_fit_a_column() -> None:
    long = [line for block in _snippets() for line in block.splitlines() if len(line) > 88]
    assert not long, long


def test_the_cheat_sheets_boto3_snippets_run_as_pasted(
    client: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup, guard, version, append, record, lifecycle = _snippets()
    assert SETUP_TABLE in setup
    monkeypatch.setattr(boto3, "client", lambda *args, **kwargs: client)
    store = ss.SessionStore(client, table)  # the real clock: the snippets use time.time()
    store.create_session("s-0001")
    store.activate("s-0001")
    ns: dict[str, Any] = {}
    exec(setup.replace(SETUP_TABLE, f"TABLE = {table!r}\n"), ns)

    # 1. The guard: lands on a live session; refused on a missing one, and no ghost is left.
    exec(guard, ns)
    assert ns["old"] is None and "lastSeen" in (_item(client, table, "metadata") or {})
    ns["key"] = {"pk": {"S": "session#s-none"}, "sk": {"S": "metadata"}}
    exec(guard, ns)
    assert ns["old"] is None and _item(client, table, "metadata", "s-none") is None
    ns["key"] = {"pk": {"S": "session#s-0001"}, "sk": {"S": "metadata"}}

    # 2. The version: another writer lands between the snippet's read and its write; the
    # snippet is refused, decides again on the item the refusal returned, and lands.
    before = _item(client, table, "metadata")
    assert before is not None
    rival = {"done": False}

    def another_writer(**_: Any) -> None:
        if not rival["done"]:
            rival["done"] = True
            store.update_attributes("s-0001", {"locale": "pt-PT"})  # a transaction

    with Hooks(client).on("before-call.dynamodb.UpdateItem", another_writer):
        exec(version, ns)
    after = _item(client, table, "metadata")
    assert rival["done"] and after is not None
    assert after["summary"] == {"S": "booked TP1300"}
    assert int(after["version"]["N"]) == int(before["version"]["N"]) + 2  # the rival's, ours
    assert ns["attempt"] == 1  # refused once, then landed: no read in between

    # 3. The append: the first seq is the count before, the page written once at its key.
    count = int(after["messageCount"]["N"])
    exec(append, ns)
    assert ns["first"] == count
    page = _item(client, table, f"msg#{count:012d}")
    assert page is not None and page["first"] == {"N": str(count)}
    meta = _item(client, table, "metadata")
    assert meta is not None and meta["messageCount"] == {"N": str(count + 1)}

    # 4. The tool call: recorded once; the repeat is cancelled with the stored record.
    exec(record, ns)
    assert ns["stored"] is None and _item(client, table, "tool#call-7f3a") is not None
    exec(record, ns)
    assert ns["stored"] is not None and ns["stored"]["toolCallId"] == {"S": "call-7f3a"}

    # 5. The lifecycle: closing from active; from closed, refused with the status it has.
    exec(lifecycle, ns)
    assert ns["now_status"] == "closing"
    assert (_item(client, table, "metadata") or {})["status"] == {"S": "closing"}
    store.close("s-0001")
    exec(lifecycle, ns)
    assert ns["now_status"] == "closed"
    assert (_item(client, table, "metadata") or {})["status"] == {"S": "closed"}


def test_the_callout_on_client_request_token_holds(client: Any, table: str) -> None:
    """The sheet's callout: a repeat under the same ``ClientRequestToken`` is answered as the
    first call's success and not applied again, on the embedded engine as on DynamoDB; a new
    call (a new token) is refused by the condition on the call's key."""
    callout = " ".join(line.removeprefix("> ") for line in SHEET.read_text().splitlines())
    assert "answered as that success and not applied again" in callout
    item = {"pk": {"S": "session#s-token"}, "sk": {"S": "tool#call-1"}, "n": {"N": "1"}}
    put = {
        "Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
    }
    client.transact_write_items(TransactItems=[put], ClientRequestToken="call-1-first")
    client.transact_write_items(TransactItems=[put], ClientRequestToken="call-1-first")
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(TransactItems=[put], ClientRequestToken="call-1-again")
    assert _item(client, table, "tool#call-1", "s-token") == item


def test_the_api_reference_covers_the_public_api_and_is_linked() -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    named = set(re.findall(r"^\.\. auto\w+:: ([\w.]+)", page, re.M))
    short = {name.rsplit(".", 1)[-1] for name in named}
    missing = [name for name in ss.__all__ if name not in short]
    assert not missing, f"docs/api.md leaves out sessionstore.{missing}"
    assert "sessionstore.aio.AsyncSessionStore" in named
    assert "sessionstore.fastmcp.StoreSessionState" in named
    for linking in ("README.md", "docs/cheatsheet.md", "docs/index.md"):
        assert "api.md)" in (ROOT / linking).read_text(), f"{linking} does not link the API page"
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert '"sphinx.ext.autodoc"' in conf


def test_the_fastmcp_one_liner_runs_with_its_store(
    engine: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/mcp.md's FastMCP block, pasted: it names its store, and on a configured endpoint
    (the shared engine the page asks two instances to use) it builds the server."""
    page = (ROOT / "docs" / "mcp.md").read_text()
    section = page[page.index("## FastMCP servers") :]
    (block,) = PYTHON.findall(section)[:1]
    assert "store = " in block and "StoreSessionState(store)" in block
    monkeypatch.setenv("SESSIONSTORE_ENDPOINT_URL", engine.endpoint_url)
    ns: dict[str, Any] = {}
    exec(block.replace('"mcp-sessions"', repr(table)), ns)
    assert type(ns["mcp"]).__name__ == "FastMCP"
    assert ns["client"].meta.endpoint_url == engine.endpoint_url
    # What the page says the extra brings: FastMCP and the SDK, not the engine.
    assert "pip install -e '.[fastmcp,local]'" in section
    pyproject = (ROOT / "pyproject.toml").read_text()
    fastmcp_extra = re.search(r"^fastmcp = \[(.*)\]$", pyproject, re.M)
    assert (
        fastmcp_extra
        and "local" not in fastmcp_extra.group(1)
        and "moto" not in pyproject[fastmcp_extra.start() : fastmcp_extra.end()]
    )
    assert "one shared embedded engine" in section and "private embedded engine" in section
