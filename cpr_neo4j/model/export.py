"""The sentence encoder exported once to ONNX, checked against sentence-transformers, kept.

Layout: CPR_HOME/encoders/all-MiniLM-L6-v2-<source key>/{model.onnx, manifest.json}. The
source key hashes the bundled files' names, sizes and mtimes with the export recipe
(EXPORT_FORMAT), so a cold process finds its export with a few stat calls; the manifest
caches the hashes of the weights and of model.onnx that name the encoder (`encoder_id`),
so nothing reads 90 MB at start-up. The build needs torch and transformers (seconds, once):
it writes a temp folder and renames it into place, so two processes racing both build and
one rename wins; an export that embeds the probe texts further than TOLERANCE from
sentence-transformers is refused and not kept.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from cpr_neo4j.config import cpr_home
from cpr_neo4j.errors import CprError
from cpr_neo4j.model.embedder import (
    ENCODER_NAME,
    INPUTS,
    OnnxEmbedder,
    bundled_model_dir,
    max_seq_length,
)
from cpr_neo4j.model.probe import PROBE_TEXTS

# Bump when the recipe changes (opset, inputs, truncation): a new folder, a new encoder id.
EXPORT_FORMAT = "onnx-v1"
OPSET = 17
# Largest allowed |ONNX - sentence-transformers| over every component of the probe
# embeddings (unit vectors); float32 reorderings stay orders of magnitude below it.
TOLERANCE = 1e-5
MODEL, MANIFEST = "model.onnx", "manifest.json"
BUILD_NEEDS = ("torch", "transformers", "onnx", "sentence_transformers")

log = logging.getLogger(__name__)


def encoders_dir() -> Path:
    return cpr_home() / "encoders"


def source_key(model_dir: Path) -> str:
    files = sorted(p for p in model_dir.iterdir() if p.is_file())
    described = {
        "dir": str(model_dir.resolve()),
        "format": EXPORT_FORMAT,
        "files": [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files],
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:12]


def export_folder(model_dir: Path | None = None) -> Path:
    model_dir = model_dir or bundled_model_dir()
    return encoders_dir() / f"{ENCODER_NAME}-{source_key(model_dir)}"


def installed(model_dir: Path | None = None, build: bool = True) -> dict[str, Any]:
    """This installation's export manifest, building the export first when it is missing;
    manifest["path"] is the model file."""
    model_dir = model_dir or bundled_model_dir()
    folder = export_folder(model_dir)
    manifest = read_manifest(folder)
    if manifest is not None:
        return manifest
    if not build:
        raise CprError(f"no exported sentence encoder in {folder}")
    return build_export(model_dir, folder)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / MANIFEST
    if not path.exists():
        if folder.exists() and any(folder.iterdir()):
            raise CprError(f"{folder} holds no {MANIFEST}: delete that folder to rebuild it")
        return None
    manifest = json.loads(path.read_text())
    model = folder / MODEL
    # a size check, not a hash: hashing 90 MB would cost a cold process ~0.1 s every time
    if not model.is_file() or model.stat().st_size != manifest.get("onnx_bytes"):
        raise CprError(f"the exported encoder in {folder} changed: delete that folder to rebuild")
    return {**manifest, "path": str(model)}


def build_export(model_dir: Path, folder: Path) -> dict[str, Any]:
    missing = [m.replace("_", "-") for m in BUILD_NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        raise CprError(
            f"exporting the sentence encoder to ONNX (once, into {folder}) needs "
            f"{', '.join(missing)}: pip install {' '.join(missing)}"
        )
    log.info("exporting %s to ONNX in %s (once)", ENCODER_NAME, folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        export_onnx(model_dir, tmp / MODEL)
        diff = check(tmp / MODEL, model_dir)
        weights = file_sha256(*weight_files(model_dir))
        onnx_sha = file_sha256(tmp / MODEL)
        manifest = {
            "encoder_id": f"{ENCODER_NAME}-{weights[:12]}-onnx-{onnx_sha[:12]}",
            "weights_sha256": weights,
            "onnx_sha256": onnx_sha,
            "onnx_bytes": (tmp / MODEL).stat().st_size,
            "format": EXPORT_FORMAT,
            "opset": OPSET,
            "max_seq_length": max_seq_length(model_dir),
            "probe": {"texts": len(PROBE_TEXTS), "max_abs_diff": diff, "tolerance": TOLERANCE},
            "source": {"model_dir": str(model_dir), "key": source_key(model_dir)},
            "versions": versions(),
            "created": datetime.now(timezone.utc).isoformat(),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        # atomic; fails when another process published first, and theirs passed the check
        with contextlib.suppress(OSError):
            os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    found = read_manifest(folder)
    if found is None:
        raise CprError(f"could not publish the exported encoder into {folder}")
    return found


def export_onnx(model_dir: Path, path: Path) -> None:
    """BERT's last hidden state for (input_ids, attention_mask, token_type_ids), dynamic
    batch and sequence axes; the legacy (TorchScript) exporter, byte-identical run to run."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # the files are local; never reach for the Hub
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a "Loading weights" bar is noise here
    bert = AutoModel.from_pretrained(str(model_dir)).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    # traced with a padded row, so the graph keeps the attention mask rather than a path
    # specialised to all-ones masks
    ids = torch.tensor([[101, 2029, 5691, 2106, 4372, 3622, 102], [101, 2040, 102, 0, 0, 0, 0]])
    dynamic = {name: {0: "batch", 1: "sequence"} for name in (*INPUTS, "last_hidden_state")}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about constant-folded Python ifs
        torch.onnx.export(
            LastHidden(),
            (ids, (ids != 0).long(), torch.zeros_like(ids)),
            str(path),
            input_names=list(INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=dynamic,
            opset_version=OPSET,
            dynamo=False,
        )


@functools.lru_cache(maxsize=4)
def _reference(model_dir: Path, texts: tuple[str, ...]) -> np.ndarray:
    return reference_embeddings(model_dir, list(texts))


def reference_embeddings(model_dir: Path, texts: list[str]) -> np.ndarray:
    """sentence-transformers' embeddings on CPU: the reference the export must match."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = SentenceTransformer(str(model_dir), device="cpu")
    return model.encode(
        texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
        show_progress_bar=False,
    ).astype(np.float32)  # fmt: skip


def probe_check(
    model_path: Path | None = None, model_dir: Path | None = None
) -> tuple[list[str], float]:
    """(probe texts, largest |ONNX - sentence-transformers| over their embeddings) for an
    export (default: this installation's); nan when the file gives non-finite numbers."""
    model_dir = model_dir or bundled_model_dir()
    model_path = Path(model_path or installed(model_dir)["path"])
    texts = list(PROBE_TEXTS)
    try:
        ours = OnnxEmbedder(model_path, model_dir).embed(texts)
    except Exception as exc:  # onnxruntime raises its own types for a damaged file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CprError(f"the ONNX encoder {model_path} does not run: {first}") from exc
    diff = np.abs(ours.astype(np.float64) - _reference(model_dir, tuple(texts))).max()
    return texts, float(diff)


def check(model_path: Path, model_dir: Path | None = None) -> float:
    """The probe difference of an export; CprError when it exceeds TOLERANCE."""
    _, diff = probe_check(model_path, model_dir)
    if not diff <= TOLERANCE:  # nan fails too
        raise CprError(
            f"the ONNX export {model_path} embeds the probe texts up to {diff:.3g} away from "
            f"sentence-transformers (tolerance {TOLERANCE:g}): refused"
        )
    return diff


def weight_files(model_dir: Path) -> list[Path]:
    return sorted(model_dir.glob("*.safetensors")) or sorted(model_dir.glob("*.bin"))


def file_sha256(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist in ("torch", "transformers", "sentence-transformers", "onnx", "onnxruntime"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out
