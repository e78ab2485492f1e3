"""Test helpers built on botocore's event system: count requests, inject faults, hook a handler
for the length of a block."""

from .faults import Fault, FaultInjector
from .hooks import Hooks
from .requests import RequestLog

__all__ = ["Fault", "FaultInjector", "Hooks", "RequestLog"]
