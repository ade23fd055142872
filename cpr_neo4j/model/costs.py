"""Path costs already computed, by (masked question, relation path), for one net.

A cost is a function of the question's text and the relation path alone, the same bits in
any batch, order, thread count or BLAS kernel (model.exact; embeddings are too, as the
encoder never pads a batch), so a kept cost is the one computing would give. Questions of
one form ("who directed X", MetaQA's templates) share their masked text: the next one of
that form skips the net's products. `cpr serve` shares one per model among its scorers.
"""

from __future__ import annotations

import json
import logging
import os
import zipfile
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from cpr_neo4j.search.base import RelPath, Step

log = logging.getLogger(__name__)

MAX_COSTS = 1 << 18  # 30 MiB of keys and floats when full (tracemalloc); then dropped


class CostCache:
    """key -> cost; safe to share between threads (each dict call holds the GIL, and every
    thread would store the same value under a key)."""

    def __init__(self, limit: int = MAX_COSTS):
        self.limit = limit
        self._known: dict[Hashable, float] = {}

    def __len__(self) -> int:
        return len(self._known)

    def items(self) -> Iterator[tuple[Hashable, float]]:
        return iter(list(self._known.items()))

    def get(self, keys: Sequence[Hashable]) -> list[float | None]:
        known = self._known
        return [known.get(k) for k in keys]

    def put(self, keys: Sequence[Hashable], costs: Sequence[float]) -> None:
        if len(self._known) + len(keys) > self.limit:
            self._known = {}  # bounded memory; a new dict, so a reader never sees it half-cleared
        self._known.update(zip(keys, costs, strict=True))


class _Afresh:
    """An encoder that embeds every text now (TextEncoder.embed_now): no cached vector,
    in memory or in texts.npz, stands in for this machine's ONNX Runtime."""

    def __init__(self, encoder: Any):
        self._inner = encoder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def encode(self, texts: Sequence[str], cache: bool = True) -> np.ndarray:
        return self._inner.embed_now(texts)


@contextmanager
def computed(scorer: Any) -> Iterator[Any]:
    """A scorer that computes everything now: the same weights, relation texts and priors
    as `scorer`, but no kept cost and no kept embedding (its own tables start empty and its
    encoder reads no cache). A check of this machine's arithmetic must not read what it
    checks: embeddings saved by calibration (texts.npz) hold every canary text, so reusing
    them would leave the encoder, the one part that differs between machines, unchecked.
    An object that is not a PathScorer (a test's stub) is used as it is."""
    from cpr_neo4j.model.scorer import PathScorer

    if not isinstance(scorer, PathScorer):
        yield scorer
        return
    yield PathScorer(
        _Afresh(scorer.encoder),
        scorer.relation_text,
        scorer.rho,
        net=scorer.net,
        device=scorer.requested_device,
        backend=scorer.backend,
    )


# ---- the table `cpr calibrate` keeps for `cpr serve` -----------------------------------
# The calibration questions' costs, saved beside the model's weights: MetaQA-like questions
# share their forms with the calibration share, so a server's first question of a form
# skips most of the net's products (bench: lone 2- and 3-hop asks 1.14x / 1.11x faster).
# A table is only a cache: at load a sample is computed again and must give the same bits
# (another CPU's embeddings may differ in the last bit), else the table is not used.

TABLE = "costs.npz"
CHECKED = 32  # entries a load computes again


def save_table(folder: Path, model_id: str, costs: CostCache) -> int:
    """Merge `costs` into folder/costs.npz (atomic replace: of two writers the newest wins,
    and either file holds correct costs); returns the entries the table now has."""
    known = read_table(folder, model_id)
    known.update(costs.items())
    entries = list(known.items())[-MAX_COSTS:]  # the newest when over the bound
    texts = list(dict.fromkeys(t for (t, _), _ in entries))
    paths = list(dict.fromkeys(p for (_, p), _ in entries))
    text_at = {t: i for i, t in enumerate(texts)}
    path_at = {p: i for i, p in enumerate(paths)}
    steps = [json.dumps([s.key() for s in p]) for p in paths]  # as the canary keeps them
    tmp = folder / f".{TABLE}.{os.getpid()}.tmp.npz"
    np.savez(
        tmp,
        model_id=np.array(model_id),
        texts=np.array(texts, dtype=str),
        paths=np.array(steps, dtype=str),
        text=np.array([text_at[t] for (t, _), _ in entries], dtype=np.int32),
        path=np.array([path_at[p] for (_, p), _ in entries], dtype=np.int32),
        cost=np.array([c for _, c in entries], dtype=np.float32),
    )
    os.replace(tmp, folder / TABLE)
    return len(entries)


def read_table(folder: Path, model_id: str) -> dict[tuple[str, RelPath], float]:
    """The saved costs ({} when none, unreadable or another model's: it is only a cache)."""
    path = folder / TABLE
    if not path.exists():
        return {}
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["model_id"]) != model_id:
                log.warning("%s is not model %s's: not used", path, model_id)
                return {}
            texts = z["texts"].tolist()
            paths = [tuple(map(Step.of_key, json.loads(p))) for p in z["paths"].tolist()]
            text, at, cost = z["text"].tolist(), z["path"].tolist(), z["cost"].tolist()
    except (OSError, ValueError, KeyError, IndexError, AttributeError, zipfile.BadZipFile) as exc:
        log.warning("cannot read %s (%s): not used", path, exc)
        return {}
    return {(texts[t], paths[p]): c for t, p, c in zip(text, at, cost, strict=True)}


def checked_table(scorer: Any, folder: Path, model_id: str) -> dict[tuple[str, RelPath], float]:
    """read_table, used only when `scorer` computes the same bits for a sample of it."""
    table = read_table(folder, model_id)
    if not table:
        return {}
    keys = list(table)
    sample = [keys[i] for i in np.linspace(0, len(keys) - 1, min(CHECKED, len(keys))).astype(int)]
    with computed(scorer) as fresh:
        fresh.questions([t for t, _ in sample])  # each text embedded once, in one batch
        fresh.path_rows([p for _, p in sample])
        now = [float(fresh.score(fresh.question(t), [p])[0]) for t, p in sample]
    if now != [table[k] for k in sample]:
        log.warning("%s: this machine computes other costs; not used", folder / TABLE)
        return {}
    return table
