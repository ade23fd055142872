"""The canary: proof that this process scores paths as the calibration did.

A calibration stores, for a few of its questions, the costs its scorer gave their best
candidate paths. A session re-scores exactly those (question, path) pairs before it
answers anything (microseconds: no search, no Neo4j) and refuses when the scores could
have moved by more than the cut's slack: another encoder export, ONNX Runtime build or CPU,
device or scorer backend could otherwise move scores past tau unseen.

The check is in score units (docs/method.md, "The same score in every batch"): a change of
at most d in every candidate's cost moves a surprisal (and an APS / RAPS mass) by at most
2 d / T, a centred cost by (1 + centre) d; the cut's slack TOLERANCE x (1 + |tau|) is at
least TOLERANCE. Without the calibration's score family the smallest T the temperature fit
can return (stages.scoring.TEMPERATURE_GRID) stands in: the strictest check.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cpr_neo4j import config
from cpr_neo4j.conformal.threshold import TOLERANCE
from cpr_neo4j.errors import Conflict
from cpr_neo4j.model import threads
from cpr_neo4j.model.costs import computed
from cpr_neo4j.search.base import RelPath, Step
from cpr_neo4j.stages.scoring import TEMPERATURE_GRID

QUESTIONS = 5  # calibration questions a canary holds
PATHS = 4  # best candidate paths per question
VERDICTS = "canary"  # folder under CPR_HOME
MODULES = ("onnxruntime", "tokenizers", "numpy", "torch")
BLAS_ENV = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "CPR_THREADS",
)


def entry(scorer: Any, masked: str, retrieval: Any) -> dict:
    """One canary question: its masked text, best candidate paths and their raw costs."""
    best = sorted(retrieval.candidates(), key=lambda c: (c.cost, c.path))[:PATHS]
    paths = [c.path for c in best]
    costs = scorer.score(scorer.question(masked), paths) if paths else np.zeros(0)
    return {
        "q": masked,
        "paths": [[s.key() for s in p] for p in paths],
        "costs": [float(c) for c in costs],
    }


def _path(keys: Sequence[str]) -> RelPath:
    return tuple(map(Step.of_key, keys))


def drift(scorer: Any, canary: Sequence[dict]) -> float:
    """The largest absolute change of a canary cost when computed here, from embeddings
    this machine's encoder computes now (never from kept costs, which may come from the
    calibration's own table, nor from kept embeddings, which texts.npz holds for every
    canary text: model.costs.computed)."""
    worst = 0.0
    with computed(scorer) as fresh:
        if hasattr(fresh, "path_rows"):  # every text embedded in two batches, not one by one
            fresh.questions([item["q"] for item in canary if item["paths"]])
            fresh.path_rows([_path(p) for item in canary for p in item["paths"]])
        for item in canary:
            if not item["paths"]:
                continue
            now = fresh.score(fresh.question(item["q"]), [_path(p) for p in item["paths"]])
            was = np.asarray(item["costs"], dtype=float)
            worst = max(worst, float(np.max(np.abs(now - was))))
    return worst


def score_per_cost(spec: Mapping[str, Any] | None) -> float:
    """The most a score moves per unit of the largest change in its question's costs."""
    if spec is None:
        return 2.0 / min(TEMPERATURE_GRID)
    if "T" in spec:  # surprisal, aps, raps: the softmax at T (raps' rank penalty: see docs)
        return 2.0 / float(spec["T"])
    if spec.get("family") == "centred":
        return 1.0 + abs(float(spec.get("centre", 0.0)))
    return 1.0


def _installed(module: str) -> list | None:
    """Where `module` is installed and that file's identity (a reinstall, of any version,
    writes new files): cheaper than reading package metadata in every cold process."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    try:
        st = os.stat(spec.origin)
    except OSError:
        return [spec.origin]
    return [spec.origin, st.st_size, st.st_ino, st.st_mtime_ns]


def _cpu() -> list[str]:
    """The first processor's model name and instruction-set flags (Linux), else what
    `platform` says: another CPU may take other kernels in ONNX Runtime and BLAS."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            first = f.read().split("\n\n", 1)[0]
    except OSError:
        return [platform.processor()]
    keep = ("vendor_id", "model name", "flags", "features", "cpu model", "isa")
    return [ln.strip() for ln in first.splitlines() if ln.split(":")[0].strip().lower() in keep]


def machine(scorer: Any) -> dict | None:
    """Everything besides the calibration that decides the bits of this process's costs;
    None for an object that is not a loaded PathScorer (then nothing is remembered)."""
    encoder = getattr(scorer, "encoder", None)
    onnx = getattr(encoder, "model_file", None)
    if onnx is None or not getattr(scorer, "model_id", None):
        return None
    try:
        st = Path(onnx).stat()
    except OSError:
        return None
    # a write changes ctime (which no one can set back) and a replaced file has a new inode
    file = [str(onnx), st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    return {
        "encoder": [encoder.model_name, *file],
        "encoder_device": encoder.device,
        "threads": [encoder.threads, threads.threads()],
        "scorer": [scorer.model_id, scorer.backend, scorer.device],
        "modules": {m: _installed(m) for m in MODULES},
        "env": {k: os.environ.get(k) for k in BLAS_ENV},
        "cpu": [platform.machine(), *_cpu()],
        "python": sys.version,
    }


def _verdict_file(calibration: str, canary: Sequence[dict], seen: dict) -> Path:
    """The canary's own costs are part of the key: a calibration whose stored canary was
    changed is checked again."""
    key = json.dumps([calibration, list(canary), seen], sort_keys=True)
    return config.cpr_home() / VERDICTS / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def _remembered(path: Path) -> float | None:
    try:
        return float(json.loads(path.read_text())["drift"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, or unreadable: check again


def _remember(path: Path, key: str, worst: float) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"calibration": key, "drift": worst}))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only CPR_HOME: the next process checks again


def check(
    scorer: Any,
    canary: Sequence[dict],
    calibration: str,
    eps: float = TOLERANCE,
    spec: Mapping[str, Any] | None = None,
    remember: str | None = None,
) -> float:
    """Refuse (Conflict: `cpr serve` answers 409) when this process's costs differ from the
    calibration's by more than moves a score by the cut's smallest slack `eps`; else the
    largest score move the drift allows (score units). remember: the calibration's key
    (id and creation time): reuse the drift an earlier process measured for it on the same
    machine (`machine`), and keep this one's when it passes."""
    seen = machine(scorer) if remember else None
    path = _verdict_file(remember, canary, seen) if remember and seen is not None else None
    worst = _remembered(path) if path is not None else None
    if worst is None:
        worst = drift(scorer, canary)
        if path is not None and worst * score_per_cost(spec) <= eps:
            _remember(path, remember, worst)
    moved = worst * score_per_cost(spec)
    if moved > eps:
        raise Conflict(
            f"this process scores paths differently from calibration {calibration} (scores "
            f"can move by {moved:.2g}, the cut's tolerance is {eps:g}): another encoder, "
            "runtime, CPU, device or scorer backend than the calibration's; run `cpr "
            "calibrate` here"
        )
    return moved
