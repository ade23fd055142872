"""Dataset names the CLI knows, mapped to their loaders. Generic triples are loaded separately."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cpr_neo4j.errors import BadInput
from cpr_neo4j.loaders.base import Dataset
from cpr_neo4j.loaders.metaqa import load_metaqa
from cpr_neo4j.loaders.nsm import load_nsm
from cpr_neo4j.loaders.rog import load_rog

KNOWN_DATASETS = ("metaqa", "webqsp", "cwq", "webqsp-nsm")

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
