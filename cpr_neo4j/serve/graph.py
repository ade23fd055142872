"""The GraphStore all requests share (the Neo4j driver is thread-safe; each query opens its
own session), opened on first use so the server starts, and answers 503, while Neo4j is
down."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from cpr_neo4j.config import Neo4jSettings
from cpr_neo4j.errors import ConnectionFailed

if TYPE_CHECKING:
    from cpr_neo4j.graph.store import GraphStore


def is_unavailable(exc: BaseException) -> bool:
    """Neo4j cannot be reached right now (a retry later may succeed)."""
    if isinstance(exc, ConnectionFailed):
        return True
    from neo4j.exceptions import ServiceUnavailable, SessionExpired, TransientError

    if isinstance(exc, TransientError):  # e.g. the database still starting after a restart
        return exc.code == "Neo.TransientError.General.DatabaseUnavailable"
    return isinstance(exc, (ServiceUnavailable, SessionExpired))


class StoreHolder:
    """Opens the store on first use; a failed open is not kept, so the next request tries
    again. An open driver is kept through outages: it reconnects by itself."""

    def __init__(
        self,
        settings: Neo4jSettings | None = None,
        connect_timeout: float = 5.0,
        retry_time: float = 3.0,
    ):
        self.settings = settings or Neo4jSettings.load()
        self.connect_timeout = connect_timeout
        self.retry_time = retry_time  # the driver retries a failed query this long (not 30 s)
        self._store: GraphStore | None = None
        self._lock = threading.Lock()

    def get(self) -> GraphStore:
        """The shared store; raises ConnectionFailed while Neo4j cannot be reached."""
        with self._lock:
            if self._store is None:
                from cpr_neo4j.graph.store import GraphStore

                self._store = GraphStore(self.settings, self.connect_timeout, self.retry_time)
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
