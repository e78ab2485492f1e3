"""Benchmarks for sessionstore: ``python -m benchmarks`` (``make bench``).

Five phases, every contender in the same process against the same embedded engine, interleaved:

1. requests per committed update (counted with botocore events) -- sessionstore, the source
   design's loop transliterated, and PynamoDB with a ``VersionAttribute``; no contention and
   8 writers on one session;
2. committed updates per second for the same runs (median of >= 5 interleaved repeats);
3. library overhead: CPU time per operation, sessionstore vs a raw boto3 client sending the
   identical request, both over botocore's ``Stubber``;
4. cost growth: write units per append as the context grows, read units to load N tool records
   (computed with ``sessionstore.sizing``: moto's capacity figures are flat);
5. suite timing: the notebook suite and ``make test``.

Results: a table on stdout, ``benchmarks/results/latest.{json,csv,md}``, ``latest.png``, and the
block between ``<!-- bench -->`` and ``<!-- /bench -->`` in README.md if those markers exist.
"""
