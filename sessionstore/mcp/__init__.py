"""``sessionstore.mcp``: MCP servers whose sessions live in the table, not in the process.

* ``SessionStoreExtension`` -- add to any ``MCPServer(extensions=[...])``: session open/close
  methods and an at-most-once, recorded-once ``tools/call`` interceptor;
* ``current_session()`` -- inside a tool: its session (context, history);
* ``create_server`` / ``create_app`` / ``RunningServer`` -- a stateless streamable-HTTP server;
* ``open_session`` / ``close_session`` / ``SessionCalls`` -- the client side on ``mcp.Client``;
* ``python -m sessionstore.mcp`` -- the demo server on 127.0.0.1.

Wire contract (keys, methods, error codes): ``sessionstore.mcp.protocol``.
"""

from .client import SessionCalls, call_meta, close_session, open_session
from .errors import to_mcp_error
from .extension import SessionStoreExtension
from .protocol import CLOSE_METHOD, EXTENSION_ID, OPEN_METHOD, SESSION_ID_KEY, TOOL_CALL_ID_KEY
from .server import RunningServer, create_app, create_server, request_state_security
from .sessions import principal_owner
from .tool_session import NoToolSession, ToolSession, current_session

__all__ = [
    "CLOSE_METHOD",
    "EXTENSION_ID",
    "OPEN_METHOD",
    "SESSION_ID_KEY",
    "TOOL_CALL_ID_KEY",
    "NoToolSession",
    "RunningServer",
    "SessionCalls",
    "SessionStoreExtension",
    "ToolSession",
    "call_meta",
    "close_session",
    "create_app",
    "create_server",
    "current_session",
    "open_session",
    "principal_owner",
    "request_state_security",
    "to_mcp_error",
]
