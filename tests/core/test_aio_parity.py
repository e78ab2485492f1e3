"""AsyncSessionStore is checked against SessionStore: the same public methods, the same parameters,
the same docstrings.

Each coroutine is derived from the method it runs (``aio.on_thread``), so these hold by
construction; the check stays, so that a method added by hand, or left out, fails here. Being
async is the only difference allowed (and, for an iterator, the note ``aio.ITERATING`` adds).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import sessionstore as ss
from sessionstore.aio import ITERATING, AsyncSessionStore

# Public methods of SessionStore with no async twin, and why. Empty: create_table is slow
# (it waits for the table) and has a twin like every other request.
SYNC_ONLY: dict[str, str] = {}

# Public methods of AsyncSessionStore with no sync twin, and why.
ASYNC_ONLY: dict[str, str] = {
    # An alternative constructor: its parameters are SessionStore's __init__, not a method's.
    "wrap": "builds the wrapped SessionStore",
    # The thread hop itself, for callers' own blocking code: a sync store has nothing to hop.
    "run": "runs any blocking callable on the store's worker threads",
}


def public_methods(cls: type) -> dict[str, Any]:
    """Public functions, classmethods and staticmethods of ``cls`` (properties are not)."""
    methods = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, classmethod | staticmethod) or inspect.isfunction(raw):
            methods[name] = getattr(cls, name)
    return methods


def parameters(method: Any) -> inspect.Signature:
    """Name, kind and default of each parameter, ``self`` left out; annotations are dropped
    (a return type must differ). ``inspect.signature`` follows ``functools.wraps``, so a traced
    method shows its own parameters."""
    params = list(inspect.signature(method).parameters.values())
    if inspect.isfunction(method) and params and params[0].name == "self":
        params = params[1:]
    return inspect.Signature([p.replace(annotation=p.empty) for p in params])


def same_doc(sync: Any, aio: Any) -> bool:
    """The async twin says what the sync method says (plus the note for an iterator)."""
    want = sync.__doc__ or ""
    return (aio.__doc__ or "") in (want, want + ITERATING.format(name=sync.__name__))


def drift(
    sync_cls: type,
    async_cls: type,
    sync_only: dict[str, str] | None = None,
    async_only: dict[str, str] | None = None,
) -> list[str]:
    """Every way ``async_cls`` differs from ``sync_cls`` besides being async; [] when none."""
    sync_only = SYNC_ONLY if sync_only is None else sync_only
    async_only = ASYNC_ONLY if async_only is None else async_only
    sync, aio = public_methods(sync_cls), public_methods(async_cls)
    found = []
    for name in sorted(sync.keys() - aio.keys() - sync_only.keys()):
        found.append(f"{async_cls.__name__} has no {name}()")
    for name in sorted(aio.keys() - sync.keys() - async_only.keys()):
        found.append(f"{sync_cls.__name__} has no {name}()")
    # A stale entry would let a method be dropped or added later without a failure here.
    for name in sorted(sync_only.keys() & aio.keys()):
        found.append(f"SYNC_ONLY names {name}, which {async_cls.__name__} has")
    for name in sorted(sync_only.keys() - sync.keys()):
        found.append(f"SYNC_ONLY names {name}, which {sync_cls.__name__} lacks")
    for name in sorted(async_only.keys() & sync.keys()):
        found.append(f"ASYNC_ONLY names {name}, which {sync_cls.__name__} has")
    for name in sorted(async_only.keys() - aio.keys()):
        found.append(f"ASYNC_ONLY names {name}, which {async_cls.__name__} lacks")
    for name in sorted(sync.keys() & aio.keys()):
        if not inspect.iscoroutinefunction(aio[name]):
            found.append(f"{async_cls.__name__}.{name} is not async")
        if inspect.iscoroutinefunction(sync[name]):
            found.append(f"{sync_cls.__name__}.{name} is async")
        want, got = parameters(sync[name]), parameters(aio[name])
        if want != got:
            found.append(f"{name}: {sync_cls.__name__}{want} but {async_cls.__name__}{got}")
        if not same_doc(sync[name], aio[name]):
            found.append(f"{name}: the docstrings differ")
    return found


def test_async_store_has_every_method_of_the_sync_store_with_its_parameters_and_doc() -> None:
    assert drift(ss.SessionStore, AsyncSessionStore) == []
    # Not vacuous: the methods that drifted before (issue 20) are among those compared.
    sync, aio = public_methods(ss.SessionStore), public_methods(AsyncSessionStore)
    compared = sync.keys() & aio.keys()
    assert {"create_session", "update_attributes", "context", "create_table"} <= compared
    # Derived, not written twice: each coroutine wraps the very method it runs.
    assert {
        name for name in compared if getattr(aio[name], "__wrapped__", None) is not sync[name]
    } == set()
    assert AsyncSessionStore.context.__doc__ != ss.SessionStore.context.__doc__  # the note


def test_a_derived_coroutine_documents_itself_like_its_method() -> None:
    # What a reader (help(), an IDE, the API reference) sees of a derived coroutine.
    method = AsyncSessionStore.update_attributes
    assert method.__name__ == "update_attributes"
    assert method.__qualname__ == "AsyncSessionStore.update_attributes"
    assert method.__module__ == "sessionstore.aio"
    assert method.__doc__ == ss.SessionStore.update_attributes.__doc__
    assert inspect.signature(method) == inspect.signature(ss.SessionStore.update_attributes)
    assert inspect.signature(AsyncSessionStore.context).return_annotation == "AsyncIterator"


class _Sync:
    def get(self, session_id: str, *, owner: str | None = None) -> int:
        return 0

    def size(self) -> int:
        """One request."""
        return 0

    def put(self, session_id: str, value: int = 0) -> None:
        pass


class _Twin:
    async def get(self, session_id: str, *, owner: str | None = None) -> int:
        return 0

    async def size(self) -> int:
        """One request."""
        return 0

    async def put(self, session_id: str, value: int = 0) -> None:
        pass


class _NoPut:
    async def get(self, session_id: str, *, owner: str | None = None) -> int:
        return 0

    async def size(self) -> int:
        """One request."""
        return 0


class _Extra(_Twin):
    async def delete(self, session_id: str) -> None:
        pass


class _Renamed(_Twin):
    async def get(self, sid: str, *, owner: str | None = None) -> int:
        return 0


class _Positional(_Twin):
    async def get(self, session_id: str, owner: str | None = None) -> int:
        return 0


class _OtherDefault(_Twin):
    async def put(self, session_id: str, value: int = 1) -> None:
        pass


class _MoreParameters(_Twin):
    async def get(self, session_id: str, *, owner: str | None = None, n: int = 0) -> int:
        return 0


class _Undocumented(_Twin):
    async def size(self) -> int:
        return 0


class _OtherDoc(_Twin):
    async def size(self) -> int:
        """Two requests."""
        return 0


class _Blocking(_Twin):
    def get(self, session_id: str, *, owner: str | None = None) -> int:  # type: ignore[override]
        return 0


@pytest.mark.parametrize(
    ("twin", "expected"),
    [
        (_Twin, []),
        (_NoPut, ["_NoPut has no put()"]),
        (_Extra, ["_Sync has no delete()"]),
        (_Renamed, ["get: "]),
        (_Positional, ["get: "]),
        (_OtherDefault, ["put: "]),
        (_MoreParameters, ["get: "]),
        (_Undocumented, ["size: the docstrings differ"]),
        (_OtherDoc, ["size: the docstrings differ"]),
        (_Blocking, ["_Blocking.get is not async"]),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_the_check_catches_each_kind_of_drift(twin: type, expected: list[str]) -> None:
    found = drift(_Sync, twin, {}, {})
    assert len(found) == len(expected), found
    assert all(f.startswith(e) for f, e in zip(found, expected, strict=True)), found


def test_a_stale_allow_list_entry_is_drift() -> None:
    found = drift(_Sync, _Twin, {"put": "why", "gone": "why"}, {"get": "why", "extra": "why"})
    assert found == [
        "SYNC_ONLY names put, which _Twin has",
        "SYNC_ONLY names gone, which _Sync lacks",
        "ASYNC_ONLY names get, which _Sync has",
        "ASYNC_ONLY names extra, which _Twin lacks",
    ]
