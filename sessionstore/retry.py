"""Bounded backoff for version conflicts only (botocore's standard mode handles throttling)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from . import validate

__all__ = ["MAX_ATTEMPTS", "MAX_DELAY_S", "RetryPolicy"]

#: Past these a policy is a mistake: a conflict retried a thousand times, or a minute apart,
#: is an outage, not contention.
MAX_ATTEMPTS = 1_000
MAX_DELAY_S = 60.0


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
        validate.int_in("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS)
        validate.seconds_in("max_delay", self.max_delay, 0, MAX_DELAY_S)
        validate.seconds_in("base_delay", self.base_delay, 0, self.max_delay)

    def delay(self, attempt: int) -> float:
        return self.rng.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))

    def backoff(self, attempt: int) -> None:
        self.sleep(self.delay(attempt))
