"""The embedded engine without HTTP, for the process that runs it.

Layer: between botocore and the embedded engine (``client.connect`` attaches it to a client of
the process-wide engine). Why: in one process -- a notebook, a script -- a request to the engine
went through botocore's HTTP client, a loopback socket, werkzeug and Flask, only to reach moto's
DynamoDB handler in the same process; that was about half of what a GetItem cost. Here botocore's
``before-send`` hands the signed request to the same handler directly, and its answer back as an
HTTP response, so everything else stays as it was: the handler, its lock (one request at a time,
``local.serialize_moto``), its checks, botocore's parsing, retries and events. Registered last, so
a test's ``FaultInjector`` and ``RequestLog`` still see every attempt first; the engine's HTTP
server keeps serving other processes (``python -m sessionstore engine`` is one such server).
"""

from __future__ import annotations

import json
from io import BytesIO
from typing import Any

_UNIQUE_ID = "sessionstore.engine-in-process"


class _Body(BytesIO):
    """A response body botocore can read and stream."""

    def stream(self, **_kwargs: Any) -> Any:
        contents = self.read()
        while contents:
            yield contents
            contents = self.read()


def attach(client: Any) -> Any:
    """Send ``client``'s DynamoDB requests to the engine in this process, not over HTTP.
    Returns the client."""
    client.meta.events.register_last("before-send.dynamodb", _send, unique_id=_UNIQUE_ID)
    return client


def _send(request: Any, **_kwargs: Any) -> Any:
    from botocore.awsrequest import AWSResponse
    from botocore.compat import HTTPHeaders
    from moto.core.request import normalize_request
    from moto.dynamodb.responses import DynamoHandler
    from werkzeug.exceptions import HTTPException

    normalized = normalize_request(request)
    try:
        status, headers, body = DynamoHandler.dispatch(
            normalized, normalized.raw_url, normalized.headers
        )
    except HTTPException as exc:  # as moto's server answers it
        status, headers, body = exc.code or 500, dict(exc.get_headers()), exc.get_body()
    except Exception as exc:  # as a server answers what it cannot handle: 500, retried
        status, headers = 500, {"Content-Type": "application/x-amz-json-1.0"}
        body = json.dumps({"__type": "InternalServerError", "message": repr(exc)})
    if isinstance(body, str):
        body = body.encode("utf-8")
    answer = HTTPHeaders()
    for name, value in dict(headers).items():
        if name != "status":  # moto's own record of the status, not a header
            answer[str(name)] = str(value)
    return AWSResponse(request.url, int(status), answer, _Body(body))
