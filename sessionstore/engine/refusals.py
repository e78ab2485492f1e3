"""The embedded engine's refusal of a request: DynamoDB's 400 ``ValidationException``.

Layer: the bottom of the embedded engine's patches; ``checks`` and ``keys`` both raise it, and it
imports none of them (so neither imports the other for it).
"""

from __future__ import annotations


def refusal(message: str) -> Exception:
    """moto's own 400 ``ValidationException`` (its server turns it into DynamoDB's answer)."""
    from moto.dynamodb.exceptions import MockValidationException

    return MockValidationException(message)
