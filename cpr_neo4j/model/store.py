"""Trained scorers on disk: cpr_home()/models/<model_id>/{weights.npz, config.json}.

The folder is named by the model id (a hash of weights, encoder, rho and relation
texts), and loading recomputes that id: a file edited or mixed up on disk is refused
rather than silently scoring differently from what was calibrated. The weights are numpy
arrays named as the torch module's state_dict, so loading needs no torch.
"""

from __future__ import annotations

import json
import threading
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cpr_neo4j.config import cpr_home
from cpr_neo4j.errors import CprError
from cpr_neo4j.model.encoder import TEXT_FORMAT, TextEncoder
from cpr_neo4j.model.rcvnet import RCVConfig, RCVWeights
from cpr_neo4j.model.scorer import PathScorer

if TYPE_CHECKING:  # training's modules stay out of a cold `cpr ask`
    from cpr_neo4j.model.train import TrainReport

WEIGHTS = "weights.npz"
OLD_WEIGHTS = "weights.pt"  # torch.save of the state_dict, before weights.npz
CONFIG = "config.json"


def models_dir() -> Path:
    return cpr_home() / "models"


def model_dir(model_id: str) -> Path:
    if not model_id or "/" in model_id or model_id.startswith("."):
        raise CprError(f"not a model id: {model_id!r}")
    return models_dir() / model_id


class Saved(Protocol):
    """What provenance is kept as: its `to_dict()` (training/puct.py RelationPriors)."""

    def to_dict(self) -> dict: ...


def save_scorer(
    scorer: PathScorer,
    meta: Mapping[str, Any] | None = None,
    *,
    dataset: str | None = None,
    hops: int | list[int] | None = None,
    negatives: str | None = None,
    report: TrainReport | None = None,
    seeds: Mapping[str, int] | None = None,
    priors: Saved | None = None,
    **extra: Any,
) -> Path:
    """Write the scorer and its provenance (what it was trained on and how, the priors'
    alpha/beta behind its rho snapshot, training figures); returns the folder.

    Provenance comes as a `meta` dict, as keywords, or both (keywords win)."""
    named = {
        "dataset": dataset,
        "hops": hops,
        "negatives": negatives,
        "training": report.to_dict() if report is not None else None,
        "seeds": dict(seeds) if seeds is not None else None,
        "priors": priors.to_dict() if priors is not None else None,
        **extra,
    }
    meta = {**(meta or {}), **{k: v for k, v in named.items() if v is not None}}
    model_id = scorer.model_id
    folder = model_dir(model_id)
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "model_id": model_id,
        **scorer.identity(),
        "rho": dict(sorted(scorer.rho.items())),
        "meta": meta,
    }
    if scorer.net is not None:
        scorer.net.save(folder / WEIGHTS)
    (folder / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True, default=str))
    return folder


def read_config(model_id: str) -> dict[str, Any]:
    path = model_dir(model_id) / CONFIG
    if not path.exists():
        known = list_models()
        hint = f" (saved: {', '.join(known)})" if known else " (none saved yet: run `cpr train`)"
        raise CprError(f"no scoring model {model_id!r} under {models_dir()}{hint}")
    return json.loads(path.read_text())


# One load at a time: np.load parses each array's header with ast.literal_eval, and
# CPython 3.11's AST construction is not thread-safe ("SystemError: AST constructor
# recursion depth mismatch" when `cpr serve` loaded two scorers at once; python/cpython#106905).
_LOADING = threading.Lock()


def load_scorer(
    model_id: str,
    encoder: TextEncoder | None = None,
    device: str | None = None,
    backend: str | None = None,
) -> PathScorer:
    """device None / "cpu": the numpy scorer; "cuda": the torch one (PathScorer)."""
    with _LOADING:
        return _load_scorer(model_id, encoder, device, backend)


def _load_scorer(
    model_id: str, encoder: TextEncoder | None, device: str | None, backend: str | None
) -> PathScorer:
    config = read_config(model_id)
    encoder = encoder or TextEncoder(device=device)
    if encoder.model_name != config["encoder"]:
        raise CprError(
            f"model {model_id} was trained with encoder {config['encoder']}, "
            f"but this installation has {encoder.model_name}: retrain with `cpr train`"
        )
    if config.get("text_format") != TEXT_FORMAT:
        raise CprError(
            f"model {model_id} uses step-text format {config.get('text_format')}, "
            f"this version writes {TEXT_FORMAT}: retrain with `cpr train`"
        )
    net = None
    if config.get("net") is not None:
        weights = model_dir(model_id) / WEIGHTS
        if not weights.exists():
            old = " (only the older weights.pt)" if (weights.parent / OLD_WEIGHTS).exists() else ""
            raise CprError(
                f"model {model_id} has no {WEIGHTS} in {weights.parent}{old}: retrain it"
            )
        try:
            net = RCVWeights.load(weights, RCVConfig(**config["net"]))
        except (ValueError, OSError, KeyError, zipfile.BadZipFile) as exc:
            raise CprError(f"cannot read {weights}: {exc}; retrain with `cpr train`") from exc
    scorer = PathScorer(encoder, config["relation_text"], config["rho"], net, device, backend)
    if scorer.model_id != model_id:
        raise CprError(
            f"model files under {model_dir(model_id)} do not hash to {model_id}: "
            "they were changed or copied from another model; retrain with `cpr train`"
        )
    return scorer


# Scorers lent to the running request by `cpr serve` (model id -> scorer); a ContextVar so
# that concurrent requests, each in its own thread, never see one another's scorer.
_LEASED: ContextVar[dict[str, PathScorer] | None] = ContextVar("cpr_leased_scorers", default=None)


def scorer_for(model_id: str) -> PathScorer:
    """The scorer lent to this request for `model_id` (see `lend`), else a fresh load."""
    leased = _LEASED.get()
    if leased is not None and model_id in leased:
        return leased[model_id]
    return load_scorer(model_id)


@contextmanager
def lend(model_id: str, scorer: PathScorer) -> Iterator[None]:
    """Within the block, `scorer_for(model_id)` returns `scorer` instead of loading (seconds)."""
    token = _LEASED.set({**(_LEASED.get() or {}), model_id: scorer})
    try:
        yield
    finally:
        _LEASED.reset(token)


def list_models() -> list[str]:
    root = models_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / CONFIG).exists())
