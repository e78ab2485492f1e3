"""sessionstore.testing.hooks on a real client against the embedded engine: a handler is
registered once however often it is attached, removed once however often it is detached, removed
when a block ends by an exception, and ``first=True`` puts it ahead of handlers that answer for
the wire."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from sessionstore.testing import Fault, FaultInjector, RequestLog
from sessionstore.testing.hooks import Attached, Hooks


def _list(client: Any) -> None:
    client.list_tables(Limit=1)


def test_attached_once_and_detached_once(client: Any) -> None:
    seen: list[str] = []
    hooks = Hooks(client).on("before-send.dynamodb", lambda **kw: seen.append(kw["event_name"]))
    hooks.attach().attach()
    _list(client)
    assert seen == ["before-send.dynamodb.ListTables"]  # one registration, not two
    hooks.detach()
    hooks.detach()
    _list(client)
    assert len(seen) == 1
    with hooks:  # attachable again after a detach
        _list(client)
    assert len(seen) == 2 and not hooks.attached


def test_a_block_ended_by_an_exception_detaches_and_is_told_why(client: Any) -> None:
    ended: list[BaseException | None] = []

    class Watch(Hooks):
        def detach(self, exc: BaseException | None = None) -> None:
            ended.append(exc)
            super().detach(exc)

    seen: list[str] = []
    watch = Watch(client).on("before-send.dynamodb", lambda **kw: seen.append("sent"))
    with pytest.raises(KeyError), watch:
        _list(client)
        raise KeyError("boom")
    _list(client)
    assert seen == ["sent"] and not watch.attached
    assert isinstance(ended[0], KeyError)


def test_first_runs_ahead_of_a_handler_that_answers_for_the_wire(client: Any) -> None:
    """A fault injector answers the attempt itself (botocore stops at the first response): a
    log attached after it still counts the attempt, because it registers first."""
    with (
        FaultInjector(client, script=[Fault.SERVER_ERROR] * 10),
        RequestLog(client) as log,
        pytest.raises(ClientError),
    ):
        _list(client)
    assert log.count >= 2  # every attempt botocore made, the injected ones included
    assert set(log.counts()) == {"ListTables"}


def test_attached_is_the_with_protocol() -> None:
    class Opened(Attached):
        __slots__ = ("log",)

        def __init__(self) -> None:
            self.log: list[object] = []

        def attach(self) -> Opened:
            self.log.append("attach")
            return self

        def detach(self, exc: BaseException | None = None) -> None:
            self.log.append(exc)

    with Opened() as opened:
        pass
    assert opened.log == ["attach", None]
