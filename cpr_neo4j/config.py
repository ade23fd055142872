"""Settings: NEO4J_* environment variables first, then the local server's files under CPR_HOME."""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cpr_neo4j.errors import BadInput

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


NO_SERVER = "defaults"  # Neo4jSettings.source when nothing is set and no server installed


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
            f"{NO_SERVER} (no NEO4J_URI and no local server installed)",
        )


def credentials_file() -> Path:
    return cpr_home() / "neo4j" / "credentials.json"


def local_server_settings() -> dict | None:
    """The local server's connection (credentials.json), or None when none is installed;
    read again only when the file changes (every answered question asks: its Browser link)."""
    path = credentials_file()
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return dict(_read_settings(str(path), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=8)
def _read_settings(path: str, mtime_ns: int, size: int) -> dict:
    return json.loads(Path(path).read_text())


# --- the local Neo4j server's memory (`cpr neo4j start --heap --pagecache`) ---------------------

_SIZE = re.compile(r"(\d+)([kmg])", re.IGNORECASE)
_UNIT = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
MIN_HEAP = 256 << 20  # below this the server stalls in GC even on a tiny graph
MIN_PAGECACHE = 16 << 20


def memory_bytes(value: str, what: str) -> int:
    """'512m' / '4g' / '65536k' -> bytes; anything else is a one-line BadInput."""
    m = _SIZE.fullmatch(str(value).strip())
    if not m or int(m[1]) == 0:
        raise BadInput(f"{what} {value!r}: give a size such as 512m or 4g (k, m or g)")
    return int(m[1]) * _UNIT[m[2].lower()]


def memory_text(n: int) -> str:
    """Bytes as Neo4j / the JVM write them: the largest whole unit ('2g', '1536m')."""
    for unit in "gmk":
        if n % _UNIT[unit] == 0:
            return f"{n // _UNIT[unit]}{unit}"
    return f"{-(-n // _UNIT['k'])}k"


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass(frozen=True)
class ServerMemory:
    """JVM heap and page cache of the local server, as size strings ('2g')."""

    heap: str
    pagecache: str

    def validated(
        self, total: int | None = None, names: tuple[str, str] = ("--heap", "--pagecache")
    ) -> ServerMemory:
        """Normalised sizes; BadInput (naming `names`, where the values came from) when
        malformed, too small or beyond the machine's RAM."""
        h, c = names
        heap = memory_bytes(self.heap, h)
        cache = memory_bytes(self.pagecache, c)
        if heap < MIN_HEAP:
            raise BadInput(f"{h} {self.heap}: at least {memory_text(MIN_HEAP)}")
        if cache < MIN_PAGECACHE:
            raise BadInput(f"{c} {self.pagecache}: at least {memory_text(MIN_PAGECACHE)}")
        total = total or physical_memory()
        if heap + cache > total:
            raise BadInput(
                f"{h} {self.heap} + {c} {self.pagecache} exceed this machine's "
                f"{total / (1 << 30):.1f} GiB of memory"
            )
        return ServerMemory(memory_text(heap), memory_text(cache))


def default_memory(total: int | None = None) -> ServerMemory:
    """A twelfth of RAM each for heap (1-4g) and page cache (512m-8g), in 512m steps: 2g and
    2g on a 24 GiB machine shared with other work. MetaQA's store is ~0.1 GB; see the
    README's "Large graphs" for a graph whose store outgrows the page cache."""
    total = total or physical_memory()
    step = 512 << 20

    def share(lo: int, hi: int) -> str:
        return memory_text(max(lo, min(hi, round(total / 12 / step) * step)))

    return ServerMemory(heap=share(1 << 30, 4 << 30), pagecache=share(512 << 20, 8 << 30))
