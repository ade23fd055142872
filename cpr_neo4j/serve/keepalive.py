"""Close each kept-alive connection after a number of responses, so that clients spread
over the worker processes again (`cpr serve --workers N`, N > 1).

The workers share one listening socket, and whichever accepts a connection serves all of
its requests. Clients that connect at once can split badly: a worker holding most of 8
closed-loop clients runs on one core while the other idles (docs/benchmarks.md). A closed
connection reconnects at its client's next request, and the idle worker, whose event loop
waits on no busy thread, accepts it first. nginx does the same (`keepalive_requests`).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CLOSE = (b"connection", b"close")
MAX_TRACKED = 4096  # connections counted at once; a client gone early is forgotten here


class KeepAliveLimit:
    """Pure ASGI: adds `Connection: close` to the `requests`-th response of a connection."""

    def __init__(self, app: ASGIApp, requests: int):
        if requests < 1:
            raise ValueError("requests must be >= 1")
        self.app, self.requests = app, requests
        self._served: dict[tuple, int] = {}  # (client host, port) -> responses begun

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] != "http" or client is None:
            return await self.app(scope, receive, send)
        key = tuple(client)
        served = self._served.pop(key, 0) + 1
        last = served >= self.requests
        if not last:
            if len(self._served) >= MAX_TRACKED:
                self._served.clear()
            self._served[key] = served

        async def closing(message: Message) -> None:
            if last and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), CLOSE]}
            await send(message)

        await self.app(scope, receive, closing)
