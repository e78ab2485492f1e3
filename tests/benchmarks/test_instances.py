"""Many instances appending to one session (``benchmarks/instances.py``, at a small scale): the
request counts, which are deterministic, whatever the number of instances."""

from __future__ import annotations

from benchmarks.instances import measure
from sessionstore.local import LocalDynamoDB


def test_fresh_instances_and_concurrent_writers_never_refuse_each_other(
    engine: LocalDynamoDB,
) -> None:
    phases, check = measure(engine.endpoint_url, fresh=24, writers=4, appends=5)
    for phase in phases:
        assert phase.committed == phase.appends, phase
        assert phase.metadata_writes == phase.committed, phase  # one UpdateItem each, none refused
        assert phase.failed_writers == 0, phase
    assert check == "44 distinct messages stored for 44 committed appends, 0 doubled"
