"""How the commands print: JSON, and text cut to the terminal without letting stored text drive it.

Text output is aligned tables (``write_table``) and ``key  value`` fields, with control
characters escaped (``printable``) and the last column cut to the terminal width (``COLUMNS``);
JSON is never cut.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import IO, Any

#: Rows a table holds back to size its columns (a Query page brings at least this many).
_SIZING_ROWS = 100
_MIN_LAST_COLUMN = 20


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


def write_array(out: IO[str], values: Iterable[Any]) -> None:
    for i, value in enumerate(values):
        out.write(("" if i == 0 else ", ") + dumps(value))


def write_lines(out: IO[str], values: Iterable[Any]) -> None:
    for value in values:
        out.write(json.dumps(value, separators=(",", ":")) + "\n")


def write_fields(out: IO[str], fields: list[tuple[str, str]], width: int) -> None:
    key_width = max(len(key) for key, _ in fields)
    for key, value in fields:
        line = f"{key.ljust(key_width)}  {printable(value)}"
        out.write(clip(line, width) + "\n")


def write_table(
    out: IO[str],
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    right: Sequence[int],
    width: int,
) -> None:
    """Plain-text columns, written as rows come: the first ``_SIZING_ROWS`` rows are held back
    to size the columns, which only widen after that. The last column is cut to ``width``."""
    cells = (tuple(printable(cell) for cell in row) for row in rows)
    held = list(itertools.islice(cells, _SIZING_ROWS))
    if not held:
        out.write("  (none)\n")
        return
    columns = range(len(headers) - 1)  # all but the last, which is cut instead
    widths = [max(len(row[i]) for row in [headers, *held]) for i in columns]
    for row in itertools.chain([headers], held, cells):
        widths = [max(widths[i], len(row[i])) for i in columns]
        parts = [
            row[i].rjust(widths[i]) if i in right else row[i].ljust(widths[i]) for i in columns
        ]
        used = sum(len(part) + 2 for part in parts)
        last = clip(row[-1], max(width - used, _MIN_LAST_COLUMN))
        out.write("  ".join([*parts, last]).rstrip() + "\n")


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
