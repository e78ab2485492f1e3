"""Bounded backoff for version conflicts only (botocore's standard mode handles throttling)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import InvalidInput


@dataclass
class RetryPolicy:
    """Exponential backoff with full jitter: attempt n sleeps uniform(0, min(cap, base * 2**n));
    ``max_attempts`` counts every attempt, the first included."""

    max_attempts: int = 16
    base_delay: float = 0.01
    max_delay: float = 0.5
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise InvalidInput(f"max_attempts must be an int >= 1, got {self.max_attempts!r}")
        if not 0 <= self.base_delay <= self.max_delay:
            raise InvalidInput("delays must satisfy 0 <= base_delay <= max_delay")

    def delay(self, attempt: int) -> float:
        return self.rng.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))

    def backoff(self, attempt: int) -> None:
        self.sleep(self.delay(attempt))
