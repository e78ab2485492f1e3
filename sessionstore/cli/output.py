"""How the commands print: JSON, and text cut to the terminal without letting stored text drive it.

Shared by every command that prints rows or fields, so ``show`` and ``context``/``history`` lay
out the same data the same way. Text output is aligned tables (``Table``) and ``key  value``
fields, with control characters escaped (``printable``) and the last column cut to the
terminal width (``COLUMNS``); JSON is never cut.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import IO, Any

#: Rows a table holds back to size its columns (a Query page brings at least this many).
_SIZING_ROWS = 100
_MIN_LAST_COLUMN = 20

# ---------------------------------------------------------------------------- JSON


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


def write_array(out: IO[str], values: Iterable[Any]) -> None:
    for i, value in enumerate(values):
        out.write(("" if i == 0 else ", ") + dumps(value))


def write_lines(out: IO[str], values: Iterable[Any]) -> None:
    for value in values:
        out.write(json.dumps(value, separators=(",", ":")) + "\n")


# ---------------------------------------------------------------------------- text


def write_fields(out: IO[str], fields: list[tuple[str, str]], width: int) -> None:
    key_width = max(len(key) for key, _ in fields)
    for key, value in fields:
        line = f"{key.ljust(key_width)}  {printable(value)}"
        out.write(clip(line, width) + "\n")


class Table:
    """Plain-text columns, written as rows come: the first ``_SIZING_ROWS`` rows are held back
    to size the columns, which only widen after that. The last column is cut to ``width``."""

    def __init__(
        self, out: IO[str], headers: Sequence[str], *, right: Sequence[int], width: int
    ) -> None:
        self._out = out
        self._headers = tuple(headers)
        self._right = frozenset(right)
        self._width = width
        self._held: list[tuple[str, ...]] | None = []
        self._widths = [len(h) for h in headers]
        self._rows = 0

    def add(self, row: Sequence[str]) -> None:
        cells = tuple(printable(cell) for cell in row)
        self._rows += 1
        if self._held is not None:
            self._held.append(cells)
            if len(self._held) >= _SIZING_ROWS:
                self._release()
            return
        self._line(cells)

    def close(self) -> None:
        if self._held is not None:
            if not self._held:
                self._out.write("  (none)\n")
                self._held = None
                return
            self._release()

    def _release(self) -> None:
        held, self._held = self._held or [], None
        for cells in held:
            self._widen(cells)
        self._line(self._headers)
        for cells in held:
            self._line(cells)

    def _widen(self, cells: Sequence[str]) -> None:
        for i, cell in enumerate(cells[:-1]):
            self._widths[i] = max(self._widths[i], len(cell))

    def _line(self, cells: Sequence[str]) -> None:
        self._widen(cells)
        parts = [
            cell.rjust(w) if i in self._right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells[:-1], self._widths, strict=False))
        ]
        used = sum(len(p) + 2 for p in parts)
        last = clip(cells[-1], max(self._width - used, _MIN_LAST_COLUMN))
        self._out.write("  ".join([*parts, last]).rstrip() + "\n")


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def printable(text: str) -> str:
    """Control and format characters escaped: stored text must not drive the terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def one_line(text: str) -> str:
    return printable(" ".join(text.split()))


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def terminal_width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def utc(epoch_s: int) -> str:
    try:
        return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "?"


def span(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"
