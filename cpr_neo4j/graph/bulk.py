"""`cpr ingest --bulk`: neo4j-admin import into the local server's empty database.

The graph (entities and relationships, the bulk of the rows) goes through CSV files
and `database import full`; questions, Relation nodes and links then go through the
ordinary MERGE path, which is quick for them and keeps one code path for the rest.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import polars as pl

from cpr_neo4j.config import cpr_home, local_server_settings
from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import ingest as writer
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.loaders.base import Dataset
from cpr_neo4j.neo4j_server import server


def _check_target(store: GraphStore) -> None:
    local = local_server_settings()
    if not local or store.settings.uri != local["uri"]:
        raise CprError(
            "--bulk imports into the local server only (`cpr neo4j start`); "
            "drop --bulk to ingest into a remote server"
        )
    if store.read("count_nodes")[0]["nodes"] > 0:
        raise CprError(
            "--bulk needs an empty database (it replaces it); drop --bulk to add "
            "this dataset with MERGE batches instead"
        )


def write_csv(dataset: Dataset, folder) -> tuple:
    folder.mkdir(parents=True, exist_ok=True)
    nodes, rels = folder / "entities.csv", folder / "triples.csv"
    dataset.entities.select(
        pl.col("id").alias(":ID"),
        pl.col("id"),
        pl.lit(dataset.name).alias("dataset"),
        pl.col("name"),
    ).write_csv(nodes)
    dataset.triples.select(
        pl.col("head").alias(":START_ID"),
        pl.col("tail").alias(":END_ID"),
        pl.col("relation").alias(":TYPE"),
    ).write_csv(rels)
    return nodes, rels


def admin_import(nodes: Path, rels: Path, folder: Path) -> subprocess.CompletedProcess:
    """neo4j-admin database import full into the (stopped) local server's database."""
    return server.admin(
        "database",
        "import",
        "full",
        f"--nodes=Entity={nodes}",
        f"--relationships={rels}",
        "--multiline-fields=true",
        f"--report-file={folder / 'import.report'}",
        "--overwrite-destination=true",
        "neo4j",
    )


def bulk_import(
    store: GraphStore, dataset: Dataset, echo: Callable[[str], None] = print
) -> writer.IngestReport:
    writer.validate_relations(dataset)
    _check_target(store)
    folder = cpr_home() / "import" / dataset.name
    nodes, rels = write_csv(dataset, folder)
    store.close()
    echo("stopping the local server for neo4j-admin import ...")
    server.stop()
    result = admin_import(nodes, rels, folder)
    echo("starting the local server again ...")
    server.start()
    if result.returncode != 0:
        raise CprError(
            "neo4j-admin import failed: "
            + result.stdout.strip()[-400:]
            + result.stderr.strip()[-400:]
        )
    shutil.rmtree(folder, ignore_errors=True)
    store.reconnect()
    report = writer.ingest(store, dataset, graph_written=True)
    report.created_nodes += dataset.entities.height
    report.created_relationships += dataset.triples.height
    return report
