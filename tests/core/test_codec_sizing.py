"""Exact JSON payloads, and DynamoDB's size rules worked out by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest

import sessionstore as ss
from sessionstore import codec, sizing, tool_calls

VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1.0,
    0.1,
    1e-7,
    -2.5e300,
    5e-324,
    10**40,
    -(10**100),
    "",
    "unicode \u00e9\u4e2d\U0001f600",
    'quote"back\\slash\nnewline\x00nul',
    [],
    {},
    [[]],
    {"": ""},
    {"nested": {"list": [1, 2.0, "3", None, {"deep": [True]}]}},
    {"b": 1, "a": 2},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_codec_round_trips_exactly(value: Any) -> None:
    back = codec.decode(codec.encode(value))
    assert back == value and type(back) is type(value)
    assert repr(back) == repr(value)  # 1 vs 1.0, key order


def test_payloads_round_trip_through_the_store(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock
) -> None:
    appended = store.append_context(active.session_id, VALUES, owner="alice")
    assert appended.message_count == len(VALUES)
    assert appended.context_bytes == sum(len(codec.encode(v).encode("utf-8")) for v in VALUES)
    assert [repr(m) for m in store.context(active.session_id, owner="alice")] == [
        repr(v) for v in VALUES
    ]
    for n, value in enumerate(VALUES):
        rec = store.record_tool_call(
            active.session_id, f"c{n}", "t", value, [value], 1, owner="alice"
        )
        assert repr(rec.input) == repr(value)
        clock.advance(ms=1)  # history is in time order; ties within a millisecond go by id
    _, context, history = store.load(active.session_id, owner="alice")
    assert [repr(m) for m in context] == [repr(v) for v in VALUES]
    assert [repr(r.input) for r in history] == [repr(v) for v in VALUES]
    assert [repr(r.output) for r in history] == [repr([v]) for v in VALUES]


@pytest.mark.parametrize(
    "bad",
    [
        math.nan,
        math.inf,
        -math.inf,
        [1, math.nan],
        {"x": math.inf},
        b"bytes",
        {1, 2},
        (1, 2),
        object(),
        {1: "int key"},
        {(1,): "tuple key"},
        "\ud800 lone surrogate",
        {"k\udfff": 1},
        10**5000,
    ],
    ids=lambda v: type(v).__name__,
)
def test_codec_refuses_what_json_cannot_hold(bad: Any) -> None:
    with pytest.raises(ss.InvalidInput):
        codec.encode(bad)


def test_a_bad_value_is_named_where_it_stands_and_nothing_is_sent(
    store: ss.SessionStore, active: ss.Session, requests: Any
) -> None:
    before = requests.count
    with pytest.raises(ss.InvalidInput, match=r"^messages\[1\] holds a tuple") as bad_message:
        store.append_context(active.session_id, ["ok", (1, 2)], owner="alice")
    with pytest.raises(ss.InvalidInput, match=r"^changes\['k'\] holds a set") as bad_attribute:
        store.update_attributes(active.session_id, {"title": "x", "k": {1, 2}}, owner="alice")
    with pytest.raises(ss.InvalidInput, match=r"^attributes\['n'\] cannot be written"):
        store.create_session(owner="alice", attributes={"n": math.nan})
    # The label is added by encoding again, outside the first error's handler: the error the
    # caller sees does not arrive chained to an unlabelled one.
    assert bad_message.value.__context__ is None
    assert bad_attribute.value.__context__ is None
    assert requests.count == before


def test_tool_call_fingerprints_refuse_what_json_cannot_hold() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    for bad in (cyclic, {"k": {1, 2}}, {1: "int key"}):
        with pytest.raises(ss.InvalidInput, match=r"^arguments"):
            tool_calls.fingerprint("search", bad)
    assert tool_calls.fingerprint("search", {"b": 1, "a": 1.0}) == tool_calls.fingerprint(
        "search", {"a": 1.0, "b": 1}
    )


def test_codec_refuses_deep_nesting_but_allows_the_limit() -> None:
    ok: Any = 0
    for _ in range(codec.MAX_DEPTH):
        ok = [ok]
    assert codec.decode(codec.encode(ok)) == ok
    with pytest.raises(ss.InvalidInput):
        codec.encode([ok])


# Worked by hand from AWS's "DynamoDB item sizes and formats":
#   name bytes + value bytes; number = ceil(significant digits / 2) + 1;
#   list/map = 3 + elements + 1 per element; bool/null = 1.
@pytest.mark.parametrize(
    "item,expected",
    [
        ({"a": {"S": "hello"}}, 1 + 5),
        ({"name": {"S": "\u00e9"}}, 4 + 2),  # UTF-8: 2 bytes
        ({"n": {"N": "7"}}, 1 + 2),  # 1 digit -> 1 + 1
        ({"n": {"N": "123"}}, 1 + 3),  # 3 digits -> 2 + 1
        ({"n": {"N": "1000"}}, 1 + 2),  # trailing zeros trimmed
        ({"n": {"N": "0.0012"}}, 1 + 2),  # leading zeros trimmed
        ({"n": {"N": "-12345"}}, 1 + 4),
        ({"b": {"BOOL": True}, "z": {"NULL": True}}, 2 + 2),
        ({"l": {"L": []}}, 1 + 3),
        ({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}, 1 + 3 + (2 + 1) + (2 + 1)),
        ({"m": {"M": {"k": {"S": "v"}}}}, 1 + 3 + (1 + 1 + 1)),
        ({"ss": {"SS": ["a", "bc"]}}, 2 + 3),
        ({"bin": {"B": b"\x00\x01\x02"}}, 3 + 3),
    ],
)
def test_item_size_matches_worked_examples(item: dict[str, Any], expected: int) -> None:
    assert sizing.item_size(item) == expected


@pytest.mark.parametrize(
    "size,strong,eventual,write,txn",
    [
        (1, 1.0, 0.5, 1, 2),
        (1024, 1.0, 0.5, 1, 2),
        (1025, 1.0, 0.5, 2, 4),
        (4096, 1.0, 0.5, 4, 8),
        (4097, 2.0, 1.0, 5, 10),
        (409_600, 100.0, 50.0, 400, 800),
    ],
)
def test_capacity_units(size: int, strong: float, eventual: float, write: int, txn: int) -> None:
    assert sizing.read_units(size) == strong
    assert sizing.read_units(size, consistent=False) == eventual
    assert sizing.write_units(size) == write
    assert sizing.write_units(size, transactional=True) == txn


def test_query_rounds_the_sum_once() -> None:
    assert sizing.query_read_units([1000] * 4) == 1.0  # 4,000 B: one 4 KB unit
    assert sizing.query_read_units([1000] * 5) == 2.0


def test_metadata_item_size_is_what_we_budget(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """The metadata item holds counters, not messages: its size stays within
    ``METADATA_OVERHEAD`` and does not grow with the context; each append's messages are in one
    page item, sized as ``sizing`` says; an append of a 1,000 B message costs 2 + 1 WCU."""
    key = {"pk": {"S": f"session#{active.session_id}"}, "sk": {"S": "metadata"}}

    def metadata() -> dict[str, Any]:
        item: dict[str, Any] = client.get_item(TableName=table, Key=key)["Item"]
        return item

    session = store.append_context(active.session_id, ["x" * 1000], owner="alice")
    raw = metadata()
    assert "context" not in raw
    assert raw["messageCount"] == {"N": "1"}
    assert int(raw["contextBytes"]["N"]) == session.context_bytes == len('"' + "x" * 1000 + '"')
    first_size = sizing.item_size(raw)
    assert first_size <= ss.METADATA_OVERHEAD
    pages = client.query(
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :msg)",
        ExpressionAttributeValues={":pk": key["pk"], ":msg": {"S": "msg#"}},
    )["Items"]
    assert [p["sk"]["S"] for p in pages] == ["msg#000000000000"]
    assert pages[0]["messages"] == {"L": [{"S": '"' + "x" * 1000 + '"'}]}
    assert sizing.write_units(first_size) + sizing.write_units(sizing.item_size(pages[0])) <= 3

    for _ in range(30):  # 30 KB more context: the metadata item does not follow it
        session = store.append_context(active.session_id, ["x" * 1000], owner="alice")
    raw = metadata()
    assert session.context_bytes == 31 * 1002
    assert sizing.item_size(raw) <= ss.METADATA_OVERHEAD
    assert sizing.item_size(raw) < first_size + 100  # counters and tokens, not messages
    assert sizing.write_units(sizing.item_size(raw)) <= 2
