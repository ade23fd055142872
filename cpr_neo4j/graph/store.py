"""GraphStore: owns the driver, names the database on every call, routes reads as reads."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any


def _hide_optional(*names: str) -> list[str]:
    """The driver imports pandas and pyarrow at import time, if installed, for DataFrame
    results we never ask for (~0.1 s of a cold `cpr ask`): hide them while it loads (the
    entries are removed again right after, so polars and the benchmarks still import them)."""
    hidden = [n for n in names if n not in sys.modules]
    for n in hidden:
        sys.modules[n] = None  # type: ignore[assignment]  # import of n raises ImportError
    return hidden


_HIDDEN = _hide_optional("pyarrow", "pandas")
from neo4j import READ_ACCESS, Driver, GraphDatabase, Query, RoutingControl  # noqa: E402
from neo4j.exceptions import (  # noqa: E402
    AuthError,
    ConfigurationError,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
    TransientError,
)

for _name in _HIDDEN:
    sys.modules.pop(_name, None)

from cpr_neo4j.config import NO_SERVER, Neo4jSettings  # noqa: E402
from cpr_neo4j.errors import ConnectionFailed  # noqa: E402
from cpr_neo4j.graph.cypher import statement  # noqa: E402

URI_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")  # the driver's


class GraphStore:
    def __init__(
        self,
        settings: Neo4jSettings | None = None,
        connect_timeout: float = 10.0,
        retry_time: float | None = None,
    ):
        """retry_time: seconds the driver retries a failed transaction (its default: 30);
        a server answering requests wants less, to report an outage quickly."""
        self.settings = settings or Neo4jSettings.load()
        self.database = self.settings.database
        self.connect_timeout = connect_timeout
        self.retry_time = retry_time
        self.reconnect()

    @classmethod
    def of_driver(cls, driver: Driver, database: str | None = None) -> GraphStore:
        """A store over a driver the caller opened (and closes: `close` leaves it open).
        Its settings are those of the environment, with this database: forked workers
        (train, calibrate) connect with them, so they must reach the same server."""
        self = cls.__new__(cls)
        self.settings = Neo4jSettings.load()
        if database:
            self.settings = replace(self.settings, database=database)
        self.database = self.settings.database
        self.connect_timeout, self.retry_time = 10.0, None
        self.driver = driver
        self._borrowed = True
        try:
            driver.verify_connectivity()
        except (ServiceUnavailable, ConfigurationError, AuthError, OSError, Neo4jError) as exc:
            raise ConnectionFailed(
                f"the Neo4j driver given cannot reach its server: {exc}"
            ) from exc
        return self

    _borrowed = False  # the driver is the caller's (of_driver)

    def reconnect(self) -> None:
        """(Re)open the driver and check the server answers; e.g. after a server restart."""
        retry = {} if self.retry_time is None else {"max_transaction_retry_time": self.retry_time}
        scheme = self.settings.uri.partition("://")[0].lower()
        if scheme not in URI_SCHEMES:  # the driver's http:// support wants aiohttp: a traceback
            raise ConnectionFailed(
                f"Neo4j URI {self.settings.uri!r} (from {self.settings.source}): the scheme "
                f"must be one of {', '.join(s + '://' for s in URI_SCHEMES)} (Bolt, e.g. "
                "bolt://127.0.0.1:7687; not Browser's http:// address)"
            )
        try:
            self.driver: Driver = GraphDatabase.driver(
                self.settings.uri,
                auth=(self.settings.username, self.settings.password),
                connection_timeout=self.connect_timeout,
                notifications_min_severity="OFF",  # schema hints, not errors: keep output clean
                **retry,
            )
            self.driver.verify_connectivity()
        except AuthError as exc:
            if self.settings.source.startswith(NO_SERVER):  # someone else's server answered
                raise ConnectionFailed(self._unreachable()) from exc
            raise ConnectionFailed(
                f"Neo4j at {self.settings.uri} refused the credentials from "
                f"{self.settings.source}: "
                "set NEO4J_USERNAME/NEO4J_PASSWORD (or unset them to use the local server's)"
            ) from exc
        except (ServiceUnavailable, ConfigurationError, ValueError, OSError, Neo4jError) as exc:
            raise ConnectionFailed(self._unreachable()) from exc

    def _unreachable(self) -> str:
        """What to do when no server answers, by where the connection came from."""
        uri, source = self.settings.uri, self.settings.source
        if source.startswith(NO_SERVER):  # nothing set and nothing installed
            return (
                "no Neo4j to use: no local server is installed under CPR_HOME and NEO4J_URI "
                "is not set: run `cpr neo4j start` (installs a local server and starts it), "
                "or set NEO4J_URI and NEO4J_PASSWORD to your server"
            )
        if source == "environment":  # NEO4J_URI wins over the local server
            return (
                f"cannot reach Neo4j at {uri} (NEO4J_URI): check that the server runs there, "
                "or unset NEO4J_URI to use the local server (`cpr neo4j start`)"
            )
        return f"the local Neo4j server ({uri}) is not running: run `cpr neo4j start`"

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._borrowed:
            self.driver.close()

    def query(self, text: str, params: dict[str, Any] | None = None, *, write: bool = False):
        """Run one statement in its own transaction; returns (records, summary).

        A read runs first as an auto-commit transaction: a managed one (execute_query) adds
        a COMMIT round trip, which made a 2-id lookup 4.5 ms instead of 2.7 ms (1.9 vs
        1.2 ms of client CPU; README "Benchmarks"). A read that fails transiently or on a
        lost connection runs again as before, a managed transaction the driver retries;
        writes always do."""
        if not write:
            try:
                return self._read_once(text, params)
            except (TransientError, ServiceUnavailable, SessionExpired):
                pass
        records, summary, _ = self.driver.execute_query(
            Query(text),
            params or {},
            database_=self.database,
            routing_=RoutingControl.WRITE if write else RoutingControl.READ,
        )
        return records, summary

    def _read_once(self, text: str, params: dict[str, Any] | None):
        with self.driver.session(
            database=self.database,
            default_access_mode=READ_ACCESS,
            bookmark_manager=self.driver.execute_query_bookmark_manager,  # sees its writes
        ) as session:
            result = session.run(Query(text), params or {})
            records = list(result)
            return records, result.consume()

    def write_once(self, name: str, /, **params: Any) -> list:
        """Records of a named write statement run as ONE auto-commit transaction: one round
        trip, where a managed one (write_rows) adds BEGIN and COMMIT (an :Ask write took
        3.8 ms managed, 3.1 ms so; docs/benchmarks.md). Never retried here: the caller
        decides what a failure left written (records.save_asks)."""
        with self.driver.session(
            database=self.database,
            bookmark_manager=self.driver.execute_query_bookmark_manager,  # reads see it
        ) as session:
            return list(session.run(Query(statement(name)), params))

    def autocommit(self, name: str, /, **params: Any):
        """Run a named statement in an implicit transaction (needed by CALL {} IN TRANSACTIONS)."""
        with self.driver.session(database=self.database) as session:
            return session.run(Query(statement(name)), params).consume().counters

    def autocommit_rows(self, name: str, /, **params: Any) -> list:
        """Records of a named statement run in an implicit transaction (CALL {} IN TRANSACTIONS)."""
        with self.driver.session(database=self.database) as session:
            return list(session.run(Query(statement(name)), params))

    def read(self, name: str, /, **params: Any) -> list:
        """Records of the named read statement (routed to a reader in a cluster)."""
        return self.query(statement(name), params)[0]

    def write(self, name: str, /, **params: Any):
        """Run a named write statement; returns its summary counters."""
        return self.query(statement(name), params, write=True)[1].counters

    def write_rows(self, name: str, /, **params: Any) -> list:
        """Records a named write statement returns (what it did not write, say)."""
        return self.query(statement(name), params, write=True)[0]

    def write_batches(
        self, text: str, rows: Iterable[dict], batch_size: int, extra: dict[str, Any] | None = None
    ) -> Iterator[tuple[int, Any]]:
        """UNWIND $rows in batches, each its own transaction; yields (rows done, counters)."""
        batch: list[dict] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= batch_size:
                yield (
                    len(batch),
                    self.query(text, {"rows": batch, **(extra or {})}, write=True)[1].counters,
                )
                batch = []
        if batch:
            yield (
                len(batch),
                self.query(text, {"rows": batch, **(extra or {})}, write=True)[1].counters,
            )
