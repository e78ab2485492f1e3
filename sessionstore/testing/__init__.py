"""Test helpers built on botocore's event system: count requests, inject faults."""

from .faults import Fault, FaultInjector
from .requests import RequestLog

__all__ = ["Fault", "FaultInjector", "RequestLog"]
