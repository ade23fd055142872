"""Start, stop and inspect the local Neo4j server under CPR_HOME/neo4j (installed by
neo4j_server.install).

Layout: lib/ (jars from Maven), conf/neo4j.conf, data/, logs/, run/neo4j.pid,
and credentials.json (0600) holding the generated password. The server listens on
127.0.0.1 only and keeps authentication on. Heap and page cache sizes live in neo4j.conf
(so `cpr ingest --bulk`, which restarts the server, keeps them).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cpr_neo4j.config import ServerMemory, credentials_file
from cpr_neo4j.errors import CprError
from cpr_neo4j.neo4j_server.conf import (
    configured_memory,
    ensure_fast_stop,
    home,
    persist_memory,
    resolve_memory,
)
from cpr_neo4j.neo4j_server.install import (
    JVM_FLAGS,
    install,
    is_installed,
    require_tool,
    run_admin,
)

MAIN_CLASS = "org.neo4j.server.CommunityEntryPoint"


@dataclass(frozen=True)
class ServerInfo:
    uri: str
    browser: str
    version: str
    pid: int
    log: Path
    memory: ServerMemory | None = None


def _pid_file() -> Path:
    return home() / "run" / "neo4j.pid"


def _log_file() -> Path:
    return home() / "logs" / "neo4j.log"


def _console_log() -> Path:
    return home() / "logs" / "console.log"


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
        uri=s["uri"],
        browser=s["http"] + "/browser/",
        version=version,
        pid=pid,
        log=_log_file(),
        memory=configured_memory(),
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
    java = require_tool("java", "install Java 17 or 21 (apt-get install openjdk-17-jre-headless)")
    persist_memory(memory)
    ensure_fast_stop()
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
    return run_admin(*args)
