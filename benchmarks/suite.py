"""Phase 5: how long the notebook suite and the whole test command take (wall time).

``make test`` is run as ``make -o .venv/.installed test``: the same recipe, minus re-installing
the virtualenv if its stamp looks stale (a benchmark must not pip-install). Each command runs in
its own process group with a timeout; on timeout the whole group is killed and the row says so.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class SuiteTiming:
    name: str
    command: str
    seconds: float
    returncode: int | None  # None: timed out
    summary: str


def _run(name: str, argv: list[str], timeout_s: float) -> SuiteTiming:
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group we started: make, pytest, kernels
        out, _ = proc.communicate()
        code = None
    seconds = time.perf_counter() - start
    lines = [ln.strip() for ln in (out or "").splitlines() if ln.strip()]
    summary = next(
        (
            ln.strip("= ")
            for ln in reversed(lines)
            if re.search(r"\b(passed|failed|error|errors|no tests ran)\b", ln)
        ),
        "",
    )
    if code is None:
        summary = f"timed out after {timeout_s:.0f} s; {summary}".rstrip("; ")
    elif code != 0 and not summary:
        summary = lines[-1] if lines else f"exit {code}"
    return SuiteTiming(
        name, " ".join(argv).replace(sys.executable, "python"), seconds, code, summary[:160]
    )


def run(*, budget_s: float, progress: object = None) -> list[SuiteTiming]:
    out: list[SuiteTiming] = []
    deadline = time.monotonic() + budget_s
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if notebooks:
        out.append(
            _run(
                "notebook suite (nbval, strict)",
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "--nbval",
                    "--nbval-current-env",
                    "notebooks/",
                ],
                max(10.0, deadline - time.monotonic()),
            )
        )
    remaining = deadline - time.monotonic()
    if remaining > 30:
        out.append(
            _run(
                "make test (ruff + tests + notebooks)",
                ["make", "--no-print-directory", "-o", ".venv/.installed", "test"],
                remaining,
            )
        )
    else:
        out.append(
            SuiteTiming(
                "make test (ruff + tests + notebooks)",
                "make test",
                0.0,
                None,
                "skipped: benchmark time budget spent",
            )
        )
    return out
