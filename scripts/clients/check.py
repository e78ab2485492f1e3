"""Assertions on what run.sh captured from clients we did not write (TS SDKs, Inspector CLI).

``python scripts/clients/check.py WORKDIR``: reads ``ts.out`` (one JSON object per line from
ts_client.mjs), ``ts2.<era>.{out,rc,restart}`` (ts_client2.mjs, and the pids of the instance
restarted mid-session) and ``inspector.<step>.{out,err,rc}``, prints one line per check (the
observed value, trimmed) and exits 1 if any check failed. Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HEX32 = re.compile(r"^[0-9a-f]{32}$")
WIDTH = 160


def trim(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    text = " ".join(text.split())
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.count = 0

    def check(self, name: str, ok: bool, observed: Any) -> None:
        self.count += 1
        if not ok:
            self.failed.append(name)
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {trim(observed)}")


def read(work: Path, name: str) -> str:
    path = work / name
    return path.read_text(errors="replace") if path.exists() else ""


def ts_steps(work: Path, name: str = "ts.out") -> dict[str, list[dict[str, Any]]]:
    steps: dict[str, list[dict[str, Any]]] = {}
    for line in read(work, name).splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and "step" in item:
            steps.setdefault(item["step"], []).append(item)
    return steps


def check_ts(work: Path, c: Checks) -> None:
    print("TypeScript SDK (ts_client.mjs):")
    rc = read(work, "ts.rc").strip()
    c.check("ts_client.mjs exit status", rc == "0", rc or "none")
    steps = ts_steps(work)
    one = {k: v[0] for k, v in steps.items()}
    connect = one.get("connect", {})
    c.check(
        "connect (legacy era)",
        connect.get("protocolVersion") == "2025-11-25",
        {k: connect.get(k) for k in ("sdk", "protocolVersion", "sessionId")},
    )
    tools = one.get("tools/list", {}).get("tools", [])
    c.check("tools/list", {"calculate", "note", "notes"} <= set(tools), tools)
    calc = one.get("calculate", {})
    c.check(
        "calculate 6*7 = 42",
        (calc.get("structuredContent") or {}).get("result") == 42 and not calc.get("isError"),
        calc,
    )
    positions = [(n.get("structuredContent") or {}).get("position") for n in steps.get("note", [])]
    c.check("note x2 (positions 1, 2)", positions == [1, 2], positions)
    notes = (one.get("notes", {}).get("structuredContent") or {}).get("result")
    c.check("notes has both notes", notes == ["from ts", "from ts"], notes)
    session_id = one.get("sessionId", {}).get("sessionId") or ""
    c.check(
        "sessionId is 32 hex, kept from initialize",
        bool(HEX32.match(session_id)) and session_id == connect.get("sessionId"),
        session_id,
    )
    term = one.get("terminate", {})
    c.check(
        "terminateSession (DELETE) clears the id",
        "sessionIdAfter" in term and term["sessionIdAfter"] is None,
        term,
    )
    same = one.get("same-client-after-terminate", {})
    error = same.get("error") or {}
    c.check(
        "same client after terminate: -32060 naming open_session",
        same.get("failed") is True
        and error.get("code") == -32060
        and "open_session" in error.get("message", ""),
        error,
    )
    stale = one.get("after-terminate", {})
    error = stale.get("error") or {}
    c.check(
        "old Mcp-Session-Id after terminate: HTTP 404",
        stale.get("failed") is True and error.get("code") == 404,
        error,
    )


NOTES = ["before restart 1", "before restart 2", "after restart 1", "after restart 2"]


def check_ts2(work: Path, c: Checks) -> None:
    print("TypeScript SDK 2.x (ts_client2.mjs; 2 instances, 1 engine, round robin, b restarted):")
    for era, version in (("legacy", "2025-11-25"), ("modern", "2026-07-28")):
        rc = read(work, f"ts2.{era}.rc").strip()
        steps = ts_steps(work, f"ts2.{era}.out")
        one = {k: v[0] for k, v in steps.items()}
        c.check(
            f"[{era}] ts_client2.mjs exit status",
            rc == "0",
            rc if rc == "0" else one.get("unexpected-error", rc or "none"),
        )
        connect = one.get("connect", {})
        session_id = connect.get("sessionId")
        c.check(
            f"[{era}] connect: era {era}, protocol {version}"
            + (", Mcp-Session-Id 32 hex" if era == "legacy" else ", no Mcp-Session-Id"),
            connect.get("era") == era
            and connect.get("protocolVersion") == version
            and (bool(HEX32.match(session_id or "")) if era == "legacy" else session_id is None),
            {k: connect.get(k) for k in ("sdk", "era", "protocolVersion", "sessionId")},
        )
        tools = one.get("tools/list", {}).get("tools", [])
        c.check(
            f"[{era}] tools/list",
            {"open_session", "calculate", "note", "notes"} <= set(tools),
            tools,
        )
        if era == "modern":
            opened = one.get("open_session", {}).get("structuredContent") or {}
            active = opened.get("status") == "active"
            c.check(
                "[modern] open_session: a 32-hex handle, active",
                bool(HEX32.match(opened.get("session_id", ""))) and active,
                opened,
            )
            kept = opened.get("session_id")
        else:
            kept = session_id
        key = "handle" if era == "modern" else "sessionId"
        before = one.get("before-restart", {}).get(key)
        after = one.get("after-restart", {}).get(key)
        restart = read(work, f"ts2.{era}.restart").split()
        c.check(
            f"[{era}] instance b restarted mid-session (a new process), the same {key} kept",
            len(restart) == 2
            and restart[0] != restart[1]
            and kept is not None
            and before == after == kept,
            {"b pids": restart, key: [before, after]},
        )
        notes = steps.get("note", [])
        positions = [(n.get("structuredContent") or {}).get("position") for n in notes]
        c.check(
            f"[{era}] note x4 (2 before, 2 after the restart): positions 1-4",
            positions == [1, 2, 3, 4] and not any(n.get("isError") for n in notes),
            positions,
        )
        calls = one.get("instances", {}).get("calls", [])
        notes_at = [x for x in calls if x["what"] == "tools/call note"]
        landed = {
            phase: sorted({x["instance"] for x in notes_at if x["phase"] == phase})
            for phase in ("before", "after")
        }
        c.check(
            f"[{era}] the notes landed on both instances before the restart and after it",
            landed == {"before": ["a", "b"], "after": ["a", "b"]}
            and all(x["status"] == 200 for x in calls),
            landed,
        )
        result = (one.get("notes", {}).get("structuredContent") or {}).get("result")
        c.check(f"[{era}] notes: all four, each once, in order", result == NOTES, result)
        if era == "legacy":
            term = one.get("terminate", {})
            c.check(
                "[legacy] terminateSession (DELETE) clears the id",
                "sessionIdAfter" in term and term["sessionIdAfter"] is None,
                term,
            )
        else:
            closed = one.get("close_session", {}).get("structuredContent") or {}
            c.check(
                "[modern] close_session: closed",
                closed.get("session_id") == kept and closed.get("status") == "closed",
                closed,
            )


def inspector(work: Path, step: str) -> tuple[str, Any, str]:
    """(exit status, stdout parsed as JSON or the raw text, stderr) of one Inspector run."""
    rc = read(work, f"inspector.{step}.rc").strip() or "none"
    out = read(work, f"inspector.{step}.out")
    try:
        parsed: Any = json.loads(out)
    except ValueError:
        parsed = out
    return rc, parsed, read(work, f"inspector.{step}.err").strip()


def structured(result: Any) -> dict[str, Any]:
    if isinstance(result, dict) and isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    return {}


def check_inspector(work: Path, c: Checks) -> None:
    print("Inspector CLI:")
    for era in ("legacy", "modern"):
        rc, out, err = inspector(work, f"{era}.tools-list")
        names = [t.get("name") for t in out.get("tools", [])] if isinstance(out, dict) else []
        c.check(
            f"[{era}] tools/list",
            rc == "0" and {"calculate", "note", "notes", "open_session"} <= set(names),
            names or err or out,
        )
        rc, out, err = inspector(work, f"{era}.calculate")
        c.check(
            f"[{era}] calculate 6*7 = 42",
            rc == "0" and structured(out).get("result") == 42,
            structured(out) or err or out,
        )
    # Legacy: every invocation is a new client, so a new Mcp-Session-Id: position 1 each time.
    for n in (1, 2):
        rc, out, err = inspector(work, f"legacy.note-{n}")
        c.check(
            f"[legacy] note text=hi, run {n} (fresh session: position 1)",
            rc == "0" and structured(out).get("position") == 1,
            structured(out) or err or out,
        )
    # Modern: no session in the protocol; the tool says how to get one.
    rc, out, err = inspector(work, "modern.note-no-session")
    c.check(
        "[modern] note without session_id refused, naming open_session",
        rc != "0" and "open_session" in err and "needs a session" in err,
        f"rc={rc} {err}",
    )
    rc, out, err = inspector(work, "modern.open-session")
    handle = structured(out).get("session_id", "")
    c.check(
        "[modern] open_session",
        rc == "0" and bool(HEX32.match(handle)) and structured(out).get("status") == "active",
        structured(out) or err or out,
    )
    for n, text in ((1, "hi"), (2, "hi again")):
        rc, out, err = inspector(work, f"modern.note-{n}")
        c.check(
            f"[modern] note text={text!r} session_id=<handle>",
            rc == "0" and structured(out).get("position") == n,
            structured(out) or err or out,
        )
    rc, out, err = inspector(work, "modern.notes")
    c.check(
        "[modern] notes session_id=<handle>",
        rc == "0" and structured(out).get("result") == ["hi", "hi again"],
        structured(out) or err or out,
    )
    rc, out, err = inspector(work, "modern.close-session")
    c.check(
        "[modern] close_session session_id=<handle>",
        rc == "0" and structured(out).get("status") == "closed",
        structured(out) or err or out,
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check.py WORKDIR", file=sys.stderr)
        return 2
    work = Path(argv[1])
    c = Checks()
    check_ts(work, c)
    check_inspector(work, c)
    check_ts2(work, c)
    line = f"clients: {c.count - len(c.failed)} of {c.count} checks passed"
    print(line + (f"; failed: {', '.join(c.failed)}" if c.failed else ""))
    return 1 if c.failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
