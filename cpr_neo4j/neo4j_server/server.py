"""Install, start, stop and inspect the local Neo4j server under CPR_HOME/neo4j.

Layout: lib/ (jars from Maven), conf/neo4j.conf, data/, logs/, run/neo4j.pid,
and credentials.json (0600) holding the generated password. The server listens on
127.0.0.1 only and keeps authentication on. Heap and page cache sizes live in neo4j.conf
(so `cpr ingest --bulk`, which restarts the server, keeps them).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cpr_neo4j.config import ServerMemory, cpr_home, credentials_file, default_memory
from cpr_neo4j.errors import CprError
from cpr_neo4j.neo4j_server.browser import post_connect_cmd

NEO4J_VERSION = "5.26.30"  # pinned in pom.xml too
POM = Path(__file__).with_name("pom.xml")
MAIN_CLASS = "org.neo4j.server.CommunityEntryPoint"
ADMIN_CLASS = "org.neo4j.cli.AdminTool"
JVM_FLAGS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
]


# neo4j.conf keys. We start the JVM ourselves, so -Xms/-Xmx come from the heap keys.
HEAP_KEYS = ("server.memory.heap.initial_size", "server.memory.heap.max_size")
PAGECACHE_KEY = "server.memory.pagecache.size"


@dataclass(frozen=True)
class ServerInfo:
    uri: str
    browser: str
    version: str
    pid: int
    log: Path
    memory: ServerMemory | None = None


def home() -> Path:
    return cpr_home() / "neo4j"


def _pid_file() -> Path:
    return home() / "run" / "neo4j.pid"


def _log_file() -> Path:
    return home() / "logs" / "neo4j.log"


def _console_log() -> Path:
    return home() / "logs" / "console.log"


def is_installed() -> bool:
    return (home() / "lib" / f"neo4j-{NEO4J_VERSION}.jar").exists() and credentials_file().exists()


def _require(tool: str, hint: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise CprError(f"`{tool}` not found: {hint}")
    return path


def _conf_file() -> Path:
    return home() / "conf" / "neo4j.conf"


def _conf_values() -> dict[str, str]:
    path = _conf_file()
    if not path.exists():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.lstrip().startswith("#")}


def configured_memory() -> ServerMemory | None:
    """The sizes neo4j.conf holds (what a running server was started with), if it has them."""
    conf = _conf_values()
    if HEAP_KEYS[1] in conf and PAGECACHE_KEY in conf:
        return ServerMemory(conf[HEAP_KEYS[1]], conf[PAGECACHE_KEY])
    return None


def resolve_memory(heap: str | None = None, pagecache: str | None = None) -> ServerMemory:
    """Validated sizes: the option, else $CPR_NEO4J_HEAP / $CPR_NEO4J_PAGECACHE, else
    neo4j.conf, else default_memory(). A bad value is a one-line BadInput naming its source."""
    conf, default, env = _conf_values(), default_memory(), os.environ

    def pick(option: str | None, flag: str, var: str, key: str, fallback: str) -> tuple[str, str]:
        for value, source in (
            (option, flag),
            (env.get(var), f"${var}"),
            (conf.get(key), f"{key} in {_conf_file()}"),
        ):
            if value:
                return value, source
        return fallback, "default"

    h, h_from = pick(heap, "--heap", "CPR_NEO4J_HEAP", HEAP_KEYS[1], default.heap)
    c, c_from = pick(
        pagecache, "--pagecache", "CPR_NEO4J_PAGECACHE", PAGECACHE_KEY, default.pagecache
    )
    return ServerMemory(h, c).validated(names=(h_from, c_from))


def _memory_lines(memory: ServerMemory) -> str:
    return (
        "".join(f"{k}={memory.heap}\n" for k in HEAP_KEYS) + f"{PAGECACHE_KEY}={memory.pagecache}\n"
    )


def _persist_memory(memory: ServerMemory) -> None:
    """Replace the memory lines of neo4j.conf, keeping everything else."""
    keys = (*HEAP_KEYS, PAGECACHE_KEY)
    path = _conf_file()
    kept = [ln for ln in path.read_text().splitlines() if ln.split("=", 1)[0].strip() not in keys]
    path.write_text("\n".join(kept) + "\n" + _memory_lines(memory))


# Bolt's worker pool waits this long for pending jobs at shutdown, when every database has
# already stopped and checkpointed; its default (10 s) made each stop, e.g. the two of
# `cpr ingest --bulk`, take 11 s instead of 1.
FAST_STOP = "internal.server.bolt.thread_pool_shutdown_wait_time=100ms"


def _ensure_fast_stop() -> None:
    """Add FAST_STOP to a neo4j.conf written before it existed (idempotent)."""
    path = _conf_file()
    text = path.read_text()
    key = FAST_STOP.split("=", 1)[0]
    if not any(ln.split("=", 1)[0].strip() == key for ln in text.splitlines()):
        path.write_text(text.rstrip("\n") + "\n" + FAST_STOP + "\n")


def _write_conf(bolt_port: int, http_port: int, memory: ServerMemory) -> None:
    conf = home() / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "neo4j.conf").write_text(
        "# Written by `cpr neo4j install`: loopback only, authentication on.\n"
        "server.default_listen_address=127.0.0.1\n"
        f"server.bolt.listen_address=127.0.0.1:{bolt_port}\n"
        # what Browser's discovery (GET /) offers: this server's Bolt port, not 7687
        f"server.bolt.advertised_address=127.0.0.1:{bolt_port}\n"
        f"server.http.listen_address=127.0.0.1:{http_port}\n"
        "server.https.enabled=false\n"
        "dbms.security.auth_enabled=true\n"
        "# JVM heap (-Xms/-Xmx) and page cache: `cpr neo4j start --heap --pagecache`.\n"
        + _memory_lines(memory)
        + "db.tx_log.rotation.retention_policy=2 files\n"
        + FAST_STOP
        + "\n"
        "# Browser applies the style for (:Ask) records at login (`cpr browser-style`).\n"
        f"browser.post_connect_cmd={post_connect_cmd()}\n"
    )


def _admin(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NEO4J_HOME=str(home()), NEO4J_CONF=str(home() / "conf"))
    java = _require("java", "install Java 17 or 21 (apt-get install openjdk-17-jre-headless)")
    return subprocess.run(
        [java, *JVM_FLAGS, "-cp", str(home() / "lib" / "*"), ADMIN_CLASS, *args],
        env=env,
        capture_output=True,
        text=True,
    )


def default_ports() -> tuple[int, int]:
    """(Bolt, HTTP): 7687 and 7474 unless CPR_NEO4J_BOLT_PORT / CPR_NEO4J_HTTP_PORT say."""
    return (
        int(os.environ.get("CPR_NEO4J_BOLT_PORT", 7687)),
        int(os.environ.get("CPR_NEO4J_HTTP_PORT", 7474)),
    )


def install(
    bolt_port: int | None = None,
    http_port: int | None = None,
    echo=print,
    heap: str | None = None,
    pagecache: str | None = None,
) -> None:
    """Fetch the jars with Maven (skipped when present), write config and a random password.

    Memory: the given sizes, else those of an earlier install (see resolve_memory)."""
    memory = resolve_memory(heap, pagecache)  # before anything is written: bad sizes fail fast
    bolt_port = bolt_port or default_ports()[0]
    http_port = http_port or default_ports()[1]
    lib = home() / "lib"
    if not (lib / f"neo4j-{NEO4J_VERSION}.jar").exists():
        mvn = _require("mvn", "install Maven (apt-get install maven) to fetch the Neo4j jars")
        echo(f"Fetching Neo4j {NEO4J_VERSION} + Browser jars from Maven Central into {lib} ...")
        done = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={lib}",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise CprError("Maven could not fetch the Neo4j jars: " + " | ".join(tail))
    for sub in ("data", "logs", "run"):
        (home() / sub).mkdir(parents=True, exist_ok=True)
    _write_conf(bolt_port, http_port, memory)
    creds = credentials_file()
    if creds.exists():
        settings = json.loads(creds.read_text())
        settings["uri"] = f"bolt://127.0.0.1:{bolt_port}"
        settings["http"] = f"http://127.0.0.1:{http_port}"
    else:
        # A leading '-' would be read by neo4j-admin as an option (1 install in 64 failed).
        password = "p" + secrets.token_urlsafe(18)
        result = _admin("dbms", "set-initial-password", password)
        if result.returncode != 0:
            raise CprError(
                f"setting the initial Neo4j password failed: {result.stderr.strip()[-300:]}"
            )
        settings = {
            "uri": f"bolt://127.0.0.1:{bolt_port}",
            "http": f"http://127.0.0.1:{http_port}",
            "username": "neo4j",
            "password": password,
        }
    creds.touch(mode=0o600, exist_ok=True)
    os.chmod(creds, 0o600)
    creds.write_text(json.dumps(settings, indent=2))


def _read_pid() -> int | None:
    try:
        pid = int(_pid_file().read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        _pid_file().unlink(missing_ok=True)  # stale: the process is gone
        return None
    except PermissionError:
        pass
    return pid


def _settings() -> dict:
    return json.loads(credentials_file().read_text())


def _bolt_version(uri: str, password: str, timeout: float = 3.0) -> str | None:
    """The server version if Bolt answers a query, else None."""
    from neo4j import GraphDatabase
    from neo4j.exceptions import Neo4jError, ServiceUnavailable

    try:
        # A plain session (not execute_query) so a refused connection fails at once, unretried.
        with (
            GraphDatabase.driver(uri, auth=("neo4j", password), connection_timeout=timeout) as drv,
            drv.session(database="system") as session,
        ):
            record = session.run(
                "CALL dbms.components() YIELD versions, edition "
                "RETURN versions[0] + ' ' + edition AS v"
            ).single()
            return record["v"] if record else None
    except (ServiceUnavailable, Neo4jError, OSError):
        return None


def status() -> ServerInfo | None:
    if not is_installed():
        return None
    pid = _read_pid()
    if pid is None:
        return None
    s = _settings()
    version = _bolt_version(s["uri"], s["password"])
    if version is None:
        return None
    return ServerInfo(
        s["uri"], s["http"] + "/browser/", version, pid, _log_file(), configured_memory()
    )


def start(
    timeout: float = 120.0, echo=print, heap: str | None = None, pagecache: str | None = None
) -> ServerInfo:
    """Start the server (idempotent) and wait until Bolt answers a query. heap / pagecache
    (e.g. '4g') are written to neo4j.conf and kept for later starts."""
    if not is_installed():
        install(echo=echo, heap=heap, pagecache=pagecache)
    memory = resolve_memory(heap, pagecache)
    running = status()
    if running:
        if (heap or pagecache) and running.memory != memory:
            now = running.memory or ServerMemory("?", "?")
            raise CprError(
                f"Neo4j already runs with heap {now.heap} and page cache {now.pagecache}: "
                "`cpr neo4j stop` first to change them"
            )
        return running
    if _read_pid() is not None:
        raise CprError(
            f"Neo4j process {_read_pid()} runs but Bolt does not answer; "
            f"see `cpr neo4j logs`, or `cpr neo4j stop` and start again"
        )
    java = _require("java", "install Java 17 or 21 (apt-get install openjdk-17-jre-headless)")
    _persist_memory(memory)
    _ensure_fast_stop()
    cmd = [
        java,
        f"-Xms{memory.heap}",
        f"-Xmx{memory.heap}",
        *JVM_FLAGS,
        "-cp",
        str(home() / "lib" / "*"),
        MAIN_CLASS,
        f"--home-dir={home()}",
        f"--config-dir={home() / 'conf'}",
    ]
    with open(_console_log(), "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=home(),
        )
    _pid_file().write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _pid_file().unlink(missing_ok=True)
            raise CprError(f"Neo4j exited at start (code {proc.returncode}); see {_console_log()}")
        info = status()
        if info:
            return info
        time.sleep(0.5)
    raise CprError(f"Neo4j did not answer on Bolt within {timeout:.0f} s; see {_log_file()}")


def stop(timeout: float = 60.0) -> bool:
    """Stop the server; True if one was running."""
    pid = _read_pid()
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        _reap(pid)
        time.sleep(0.3)
    else:
        os.kill(pid, signal.SIGKILL)
    _pid_file().unlink(missing_ok=True)
    return True


def _reap(pid: int) -> None:
    # When this process started the server, collect it so it does not linger as a zombie.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 (loopback URL we wrote)
            return resp.status == 200
    except OSError:
        return False


def log_tail(lines: int = 40) -> str:
    texts = []
    for path in (_log_file(), _console_log()):
        if path.exists():
            texts.append(
                f"== {path} ==\n"
                + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            )
    return "\n".join(texts) or f"no logs under {home() / 'logs'}"


def admin(*args: str) -> subprocess.CompletedProcess:
    """Run neo4j-admin (AdminTool) from the installed jars; used by bulk import."""
    if not is_installed():
        raise CprError("the local Neo4j server is not installed: run `cpr neo4j install`")
    return _admin(*args)
