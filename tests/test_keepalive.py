"""serve/keepalive.py: the n-th response of a connection says `Connection: close`, so its
client reconnects (to whichever worker accepts first); other responses keep it open."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from cpr_neo4j.serve.keepalive import KeepAliveLimit


def app_closing_after(n: int) -> FastAPI:
    app = FastAPI()
    app.add_middleware(KeepAliveLimit, requests=n)

    @app.get("/x")
    def x() -> dict:
        return {"ok": True}

    return app


def test_every_nth_response_of_a_connection_closes_it():
    with TestClient(app_closing_after(3)) as c:  # one client address: one connection
        replies = [c.get("/x") for _ in range(7)]
    assert all(r.json() == {"ok": True} for r in replies)
    closes = [r.headers.get("connection") for r in replies]
    assert closes == [None, None, "close", None, None, "close", None]


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError):
        KeepAliveLimit(app_closing_after(1), 0)
