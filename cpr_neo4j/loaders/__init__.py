"""Dataset loaders: files in, `Dataset` (polars frames) out. No Neo4j here."""

from cpr_neo4j.loaders.base import Dataset, Problem
from cpr_neo4j.loaders.metaqa import load_metaqa
from cpr_neo4j.loaders.nsm import load_nsm
from cpr_neo4j.loaders.registry import KNOWN_DATASETS, load_dataset
from cpr_neo4j.loaders.rog import load_rog
from cpr_neo4j.loaders.triples import load_triples

__all__ = [
    "KNOWN_DATASETS",
    "Dataset",
    "Problem",
    "load_dataset",
    "load_metaqa",
    "load_nsm",
    "load_rog",
    "load_triples",
]
