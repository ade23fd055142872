"""The local Neo4j server's configuration under CPR_HOME/neo4j: where it lives, neo4j.conf
(loopback only, authentication on, memory sizes, fast stop) and the ports it listens on.
"""

from __future__ import annotations

import os
from pathlib import Path

from cpr_neo4j.config import ServerMemory, cpr_home, default_memory
from cpr_neo4j.neo4j_server.browser import post_connect_cmd

# neo4j.conf keys. We start the JVM ourselves, so -Xms/-Xmx come from the heap keys.
HEAP_KEYS = ("server.memory.heap.initial_size", "server.memory.heap.max_size")
PAGECACHE_KEY = "server.memory.pagecache.size"


def home() -> Path:
    return cpr_home() / "neo4j"


def conf_file() -> Path:
    return home() / "conf" / "neo4j.conf"


def conf_values() -> dict[str, str]:
    path = conf_file()
    if not path.exists():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.lstrip().startswith("#")}


def configured_memory() -> ServerMemory | None:
    """The sizes neo4j.conf holds (what a running server was started with), if it has them."""
    conf = conf_values()
    if HEAP_KEYS[1] in conf and PAGECACHE_KEY in conf:
        return ServerMemory(conf[HEAP_KEYS[1]], conf[PAGECACHE_KEY])
    return None


def resolve_memory(heap: str | None = None, pagecache: str | None = None) -> ServerMemory:
    """Validated sizes: the option, else $CPR_NEO4J_HEAP / $CPR_NEO4J_PAGECACHE, else
    neo4j.conf, else default_memory(). A bad value is a one-line BadInput naming its source."""
    conf, default, env = conf_values(), default_memory(), os.environ

    def pick(option: str | None, flag: str, var: str, key: str, fallback: str) -> tuple[str, str]:
        for value, source in (
            (option, flag),
            (env.get(var), f"${var}"),
            (conf.get(key), f"{key} in {conf_file()}"),
        ):
            if value:
                return value, source
        return fallback, "default"

    h, h_from = pick(heap, "--heap", "CPR_NEO4J_HEAP", HEAP_KEYS[1], default.heap)
    c, c_from = pick(
        pagecache, "--pagecache", "CPR_NEO4J_PAGECACHE", PAGECACHE_KEY, default.pagecache
    )
    return ServerMemory(h, c).validated(names=(h_from, c_from))


def memory_lines(memory: ServerMemory) -> str:
    return (
        "".join(f"{k}={memory.heap}\n" for k in HEAP_KEYS) + f"{PAGECACHE_KEY}={memory.pagecache}\n"
    )


def persist_memory(memory: ServerMemory) -> None:
    """Replace the memory lines of neo4j.conf, keeping everything else."""
    keys = (*HEAP_KEYS, PAGECACHE_KEY)
    path = conf_file()
    kept = [ln for ln in path.read_text().splitlines() if ln.split("=", 1)[0].strip() not in keys]
    path.write_text("\n".join(kept) + "\n" + memory_lines(memory))


# Bolt's worker pool waits this long for pending jobs at shutdown, when every database has
# already stopped and checkpointed; its default (10 s) made each stop, e.g. the two of
# `cpr ingest --bulk`, take 11 s instead of 1.
FAST_STOP = "internal.server.bolt.thread_pool_shutdown_wait_time=100ms"


def ensure_fast_stop() -> None:
    """Add FAST_STOP to a neo4j.conf written before it existed (idempotent)."""
    path = conf_file()
    text = path.read_text()
    key = FAST_STOP.split("=", 1)[0]
    if not any(ln.split("=", 1)[0].strip() == key for ln in text.splitlines()):
        path.write_text(text.rstrip("\n") + "\n" + FAST_STOP + "\n")


def write_conf(bolt_port: int, http_port: int, memory: ServerMemory) -> None:
    path = conf_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Written by `cpr neo4j install`: loopback only, authentication on.\n"
        "server.default_listen_address=127.0.0.1\n"
        f"server.bolt.listen_address=127.0.0.1:{bolt_port}\n"
        # what Browser's discovery (GET /) offers: this server's Bolt port, not 7687
        f"server.bolt.advertised_address=127.0.0.1:{bolt_port}\n"
        f"server.http.listen_address=127.0.0.1:{http_port}\n"
        "server.https.enabled=false\n"
        "dbms.security.auth_enabled=true\n"
        "# JVM heap (-Xms/-Xmx) and page cache: `cpr neo4j start --heap --pagecache`.\n"
        + memory_lines(memory)
        + "db.tx_log.rotation.retention_policy=2 files\n"
        + FAST_STOP
        + "\n"
        "# Browser applies the style for (:Ask) records at login (`cpr browser-style`).\n"
        f"browser.post_connect_cmd={post_connect_cmd()}\n"
    )


def default_ports() -> tuple[int, int]:
    """(Bolt, HTTP): 7687 and 7474 unless CPR_NEO4J_BOLT_PORT / CPR_NEO4J_HTTP_PORT say."""
    return (
        int(os.environ.get("CPR_NEO4J_BOLT_PORT", 7687)),
        int(os.environ.get("CPR_NEO4J_HTTP_PORT", 7474)),
    )
