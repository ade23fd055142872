"""Who may call the API: anyone on this machine by default; a bearer token beyond it.

No `from __future__ import annotations` here: FastAPI reads the dependency's annotations
at run time, and the security scheme is a local of `bearer_check`.
"""

import hmac
import ipaddress
from collections.abc import Callable
from typing import Annotated

from fastapi import HTTPException, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cpr_neo4j.errors import BadInput

TOKEN_ENV = "CPR_API_TOKEN"
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def check_bind(host: str, token: str | None) -> None:
    """Refuse to expose the API beyond loopback without a token (it writes to Neo4j)."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise BadInput(
            f"{TOKEN_ENV} is too short: use at least {MIN_TOKEN_CHARS} random characters"
        )
    if token is None and not is_loopback(host):
        raise BadInput(
            f"binding {host} would let other machines ask (and write :Ask nodes): set "
            f"{TOKEN_ENV} to a random secret (clients send `Authorization: Bearer <token>`), "
            "or bind 127.0.0.1"
        )


def bearer_check(token: str) -> Callable[[HTTPAuthorizationCredentials | None], None]:
    """A FastAPI dependency that answers 401 unless the request carries the token."""
    expected = token.encode()

    scheme = HTTPBearer(auto_error=False)

    def check(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Security(scheme)],
    ) -> None:
        given = credentials.credentials.encode() if credentials is not None else b""
        if not hmac.compare_digest(given, expected):
            raise HTTPException(
                status_code=401,
                detail="missing or wrong bearer token (Authorization: Bearer <CPR_API_TOKEN>)",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return check
