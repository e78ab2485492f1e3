"""``sessionstore create-table``: create the table if missing (idempotent).

Says where the table now is; with no endpoint configured that is this process's own embedded
engine, gone when it exits, so a note on stderr says so.
"""

from __future__ import annotations

import argparse
import sys

from .common import PROG, Command, connection_options
from .output import dumps
from .target import Target


def register(command: Command) -> None:
    create = command("create-table", "create the table if missing (idempotent)")
    connection_options(create, top=False)
    create.add_argument("--json", action="store_true", help="one JSON document")
    create.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    with Target(args) as target:
        created = target.store.create_table()
    if args.json:
        document = {"table": target.table, "endpoint": target.where, "created": created}
        sys.stdout.write(dumps(document) + "\n")
    else:
        said = "created" if created else "already exists"
        sys.stdout.write(f"table {target.table!r} {said} at {target.where}\n")
    if target.embedded:
        print(
            f"{PROG}: note: no endpoint is configured: the table is in this process's embedded "
            "engine, gone when it exits",
            file=sys.stderr,
        )
