"""Dataset names the CLI knows, mapped to their loaders. Generic triples are loaded separately."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from cpr_neo4j.errors import BadInput
from cpr_neo4j.loaders.base import SPLITS, Dataset
from cpr_neo4j.loaders.metaqa import load_metaqa
from cpr_neo4j.loaders.nsm import load_nsm
from cpr_neo4j.loaders.rog import load_rog

KNOWN_DATASETS = ("metaqa", "metaqa-matched", "metaqa-plain", "webqsp", "cwq", "webqsp-nsm")

# The 250-question NSM-layout sample beside a source checkout (../shared/data/...), if present.
NSM_SAMPLE = (
    Path(__file__).resolve().parents[3] / "shared/data/webqsp_epr_dev_sample/raw/dev_simple.jsonl"
)


def load_dataset(
    name: str, source: Path | None = None, strict: bool = False, **opts: Any
) -> Dataset:
    """Load a known dataset; `source` is the CLI's --from PATH (None: bundled or downloaded).

    opts go to the loader: metaqa hops/splits, webqsp/cwq revision/split, webqsp-nsm split.
    """
    source = Path(source) if source is not None else None
    if name == "metaqa":
        return load_metaqa(source, strict=strict, **opts)
    if name == "metaqa-plain":  # questions as people type them: no [brackets]
        return load_metaqa(source, strict=strict, plain=True, **opts)
    if name == "metaqa-matched":  # the KB without the 1-hop test answers' head start
        return load_metaqa(source, strict=strict, kb="matched", **opts)
    if name in ("webqsp", "cwq"):
        return load_rog(name, source, strict=strict, **opts)
    if name == "webqsp-nsm":
        if source is None:
            if not NSM_SAMPLE.is_file():
                raise BadInput("webqsp-nsm needs its NSM/GraftNet .jsonl files: --from PATH")
            source = NSM_SAMPLE
        return load_nsm(source, name=name, strict=strict, **opts)
    raise BadInput(
        f"unknown dataset {name!r} (known: {', '.join(KNOWN_DATASETS)}; "
        "or load your own triples.tsv)"
    )


def parse_shares(text: str) -> tuple[float, float, float]:
    """`70,0,30` (or `0.7,0,0.3`) -> train/dev/test shares summing to 1."""
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) != 3 or min(parts) < 0 or sum(parts) <= 0:
        raise BadInput(
            f"--hash-split takes three shares TRAIN,DEV,TEST (e.g. 70,0,30), got {text!r}"
        )
    total = sum(parts)
    return parts[0] / total, parts[1] / total, parts[2] / total


def hash_split(dataset: Dataset, shares: tuple[float, float, float]) -> Dataset:
    """Each question's split from a hash of its id: the same split on every machine and run,
    whatever the file order (for sources with a single split, e.g. the 250-question NSM
    sample: `cpr train` needs train, `cpr eval` test)."""

    def split_of(qid: str) -> str:
        u = int.from_bytes(hashlib.sha256(qid.encode()).digest()[:8], "big") / 2**64
        return SPLITS[0] if u < shares[0] else SPLITS[1] if u < shares[0] + shares[1] else SPLITS[2]

    ids = dataset.questions.get_column("id").to_list()
    splits = pl.Series("split", [split_of(q) for q in ids], dtype=pl.Utf8)
    return replace(dataset, questions=dataset.questions.with_columns(splits))


def answerable_only(dataset: Dataset) -> Dataset:
    """Only questions with a gold answer inside their own subgraph (the graph itself when the
    dataset has no per-question subgraphs); the graph stays the union of every subgraph."""
    pairs = dataset.questions.select("id", "answers").explode("answers").drop_nulls()
    if dataset.subgraphs is not None:
        members = dataset.subgraphs.rename({"question": "id", "entity": "answers"})
        kept = pairs.join(members, on=["id", "answers"], how="semi")
    else:
        ents = dataset.entities.select(pl.col("id").alias("answers"))
        kept = pairs.join(ents, on="answers", how="semi")
    ids = kept.get_column("id").unique()
    questions = dataset.questions.filter(pl.col("id").is_in(ids.implode()))
    subgraphs = dataset.subgraphs
    if subgraphs is not None:
        subgraphs = subgraphs.filter(pl.col("question").is_in(ids.implode()))
    return replace(dataset, questions=questions, subgraphs=subgraphs)
