"""The load balancer run.sh puts in front of two instances: the project's round robin, named.

``python scripts/clients/round_robin.py PORT NAME=URL...`` serves
``sessionstore.testing.proxy.RoundRobinProxy`` over the URLs on 127.0.0.1:PORT, and adds to each
response a header ``x-sessionstore-instance: NAME`` naming the instance that answered, so that a
client's log shows where each of its calls landed. The name is read from the proxy's own routing
log; it is exact for a client that sends one request at a time (ts_client2.mjs does).
"""

from __future__ import annotations

import sys

import uvicorn
from starlette.types import Message, Receive, Scope, Send

from sessionstore.testing.proxy import RoundRobinProxy

HEADER = b"x-sessionstore-instance"


def main(argv: list[str]) -> int:
    if len(argv) < 3 or not all("=" in a for a in argv[2:]):
        print("usage: round_robin.py PORT NAME=URL...", file=sys.stderr)
        return 2
    port = int(argv[1])
    named = dict(a.split("=", 1) for a in argv[2:])
    proxy = RoundRobinProxy(list(named.values()))
    names = {url.rstrip("/"): name for name, url in named.items()}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await proxy(scope, receive, send)
            return
        routed = len(proxy.log)

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start" and len(proxy.log) > routed:
                backend = proxy.log[routed][1]
                headers = [*message.get("headers", []), (HEADER, names[backend].encode())]
                message = {**message, "headers": headers}
            await send(message)

        await proxy(scope, receive, tagged)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
