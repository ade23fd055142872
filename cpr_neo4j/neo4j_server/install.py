"""`cpr neo4j install`: the Neo4j jars from Maven Central, neo4j.conf and a password.

Layout under CPR_HOME/neo4j: lib/ (the jars), conf/neo4j.conf, data/, logs/, run/, and
credentials.json (0600) holding the generated password (neo4j_server.server runs it), and
what both need of the jars: the pinned version, the JVM flags and neo4j-admin.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from cpr_neo4j.config import credentials_file
from cpr_neo4j.errors import CprError
from cpr_neo4j.neo4j_server.conf import conf_file, default_ports, home, resolve_memory, write_conf

NEO4J_VERSION = "5.26.30"  # pinned in pom.xml too
POM = Path(__file__).with_name("pom.xml")  # pins NEO4J_VERSION too
ADMIN_CLASS = "org.neo4j.cli.AdminTool"
JVM_FLAGS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
]


def is_installed() -> bool:
    return (home() / "lib" / f"neo4j-{NEO4J_VERSION}.jar").exists() and credentials_file().exists()


def require_tool(tool: str, hint: str) -> str:
    """The path of `tool`, or a CprError saying how to install it."""
    path = shutil.which(tool)
    if not path:
        raise CprError(f"`{tool}` not found: {hint}")
    return path


def run_admin(*args: str) -> subprocess.CompletedProcess:
    """neo4j-admin (AdminTool) from the jars under CPR_HOME, installed or not yet."""
    env = dict(os.environ, NEO4J_HOME=str(home()), NEO4J_CONF=str(conf_file().parent))
    java = require_tool("java", "install Java 17 or 21 (apt-get install openjdk-17-jre-headless)")
    return subprocess.run(
        [java, *JVM_FLAGS, "-cp", str(home() / "lib" / "*"), ADMIN_CLASS, *args],
        env=env,
        capture_output=True,
        text=True,
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
        mvn = require_tool("mvn", "install Maven (apt-get install maven) to fetch the Neo4j jars")
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
    write_conf(bolt_port, http_port, memory)
    creds = credentials_file()
    if creds.exists():
        settings = json.loads(creds.read_text())
        settings["uri"] = f"bolt://127.0.0.1:{bolt_port}"
        settings["http"] = f"http://127.0.0.1:{http_port}"
    else:
        # A leading '-' would be read by neo4j-admin as an option (1 install in 64 failed).
        password = "p" + secrets.token_urlsafe(18)
        result = run_admin("dbms", "set-initial-password", password)
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
