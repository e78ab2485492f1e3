"""The MCP conformance suite's server: the demo MCP server (``sessionstore.mcp``) with the
suite's fixture tools, prompts and resources (``fixtures``).

Layer: over the MCP layer, beside the demo server; nothing of the store or of ``sessionstore.mcp``
imports it. Why a package of its own: the fixtures exist to let an outside yardstick drive every
feature of the protocol through the store, which no user's server needs.
``python -m sessionstore.conformance`` serves it (``make conformance``).
"""

from .fixtures import add_conformance_fixtures

__all__ = ["add_conformance_fixtures"]
