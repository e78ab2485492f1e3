"""Exercises of the core notebooks (01-05), each with a checker that runs the learner's answer
against the engine the notebook uses and says what is wrong.

Layer: beside the tutorial set-up (``sessionstore.tutorial``), over the public package; nothing
of the store depends on it. Why here and not in the notebooks: a checker is code, tested like
code -- CI runs every checker on its exercise's unsolved ``stub`` (it must fail) and on its
``solution`` (it must pass), and checks that the notebook shows exactly that stub and solution.

One module per notebook, named like it (``optimistic_locking`` for 02). Each exercise is an
``Exercise``: its stub, its solution, and its checker. A notebook cell shows the stub's source for
the learner to edit, then ``EXERCISE.check(answer, ...)`` prints ``Correct: ...`` or ``Not yet:
...``; the solution cell (hidden by default) does the same with the solution.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class NotYet(Exception):
    """What a checker raises when the answer is wrong: the message says what and why."""


@dataclass(frozen=True)
class Exercise:
    """``check(answer, *context)`` raises ``NotYet`` or returns what the answer got right."""

    name: str
    stub: Callable[..., Any]
    solution: Callable[..., Any]
    checker: Callable[..., str]

    def check(self, answer: Callable[..., Any], *context: Any) -> None:
        """Run the checker on ``answer`` and print its verdict, wrapped to fit a cell's output."""
        print(textwrap.fill(self.verdict(answer, *context), 96, break_on_hyphens=False))

    def verdict(self, answer: Callable[..., Any], *context: Any) -> str:
        """``Correct: ...`` or ``Not yet: ...``."""
        try:
            return f"Correct: {self.checker(answer, *context)}"
        except NotYet as exc:
            return f"Not yet: {exc}"
