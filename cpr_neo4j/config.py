"""Settings: NEO4J_* environment variables first, then the local server's files under CPR_HOME."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def cpr_home() -> Path:
    return Path(os.environ.get("CPR_HOME", Path.home() / ".cpr")).expanduser()


def resource_dir(name: str) -> Path:
    """A top-level folder shipped with the package (`cypher`, `data`).

    In a wheel it lies inside the package; in a source checkout beside it.
    """
    for candidate in (PACKAGE_DIR / name, PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"package resource folder {name!r} not found")


@dataclass(frozen=True)
class Neo4jSettings:
    uri: str
    username: str
    password: str
    database: str
    source: str  # "environment" or the local credentials file: named in error messages

    @classmethod
    def load(cls) -> Neo4jSettings:
        env = os.environ
        local = local_server_settings()
        if env.get("NEO4J_URI") or env.get("NEO4J_PASSWORD"):
            uri = env.get("NEO4J_URI") or (local or {}).get("uri", "bolt://127.0.0.1:7687")
            # The local server's password is only ever sent to the local server.
            fallback = (local or {}).get("password", "") if local and uri == local["uri"] else ""
            return cls(
                uri=uri,
                username=env.get("NEO4J_USERNAME", "neo4j"),
                password=env.get("NEO4J_PASSWORD") or fallback,
                database=env.get("NEO4J_DATABASE", "neo4j"),
                source="environment",
            )
        if local:
            return cls(
                uri=local["uri"],
                username=local.get("username", "neo4j"),
                password=local["password"],
                database=env.get("NEO4J_DATABASE", "neo4j"),
                source=str(credentials_file()),
            )
        return cls(
            "bolt://127.0.0.1:7687",
            "neo4j",
            "",
            env.get("NEO4J_DATABASE", "neo4j"),
            "defaults (no NEO4J_URI and no local server installed)",
        )


def credentials_file() -> Path:
    return cpr_home() / "neo4j" / "credentials.json"


def local_server_settings() -> dict | None:
    path = credentials_file()
    if not path.exists():
        return None
    return json.loads(path.read_text())
