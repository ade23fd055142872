"""`cpr ingest --bulk`: neo4j-admin import into the local server's empty database.

The graph (entities and relationships) and, when they fit the CSV form, the questions with
their TOPIC/ANSWER links and per-question subgraph membership (IN_SUBGRAPH, the same
relationship graph/subgraphs.py MERGEs online) go through CSV files and
`database import full`; Relation nodes,
the schema and the Dataset record then go through the ordinary MERGE path. Questions were
the slow part of that path (MetaQA: 78k questions and 680k links took longer than the
graph), hence the import.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from cpr_neo4j.config import cpr_home, local_server_settings
from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import ingest as writer
from cpr_neo4j.graph.entity_index import LinkFields
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


ARRAY_DELIMITERS = ";|^~"


def _delimiter(questions: pl.DataFrame) -> str | None:
    """An array delimiter no topic or answer id contains; None when the questions do not fit
    the CSV form (an empty list would be imported as no property, where MERGE stores [])."""
    if questions.is_empty():
        return None
    lists = questions.select(pl.concat_list("topics", "answers").alias("ids"))
    if (
        questions.select((pl.col("topics").list.len() * pl.col("answers").list.len()).min()).item()
        == 0
    ):
        return None
    ids = lists.explode("ids").get_column("ids").drop_nulls()
    for d in ARRAY_DELIMITERS:
        if not ids.str.contains(d, literal=True).any():
            return d
    return None


IN_SUBGRAPH = "IN_SUBGRAPH"  # (:Question)-[:IN_SUBGRAPH]->(:Entity), as online


@dataclass
class ImportFiles:
    args: list[str]  # neo4j-admin --nodes / --relationships options
    delimiter: str | None = None  # the array delimiter; None when questions are not in
    questions: int = 0
    links: int = 0  # TOPIC/ANSWER and IN_SUBGRAPH relationships


def write_csv(dataset: Dataset, folder: Path, questions: bool = True) -> ImportFiles:
    """The CSV files of the graph, and of the questions and links when they fit (and
    `questions`: False leaves them to MERGE, the previous way, as a benchmark baseline)."""
    folder.mkdir(parents=True, exist_ok=True)
    nodes, rels = folder / "entities.csv", folder / "triples.csv"
    # with the linker's fields (graph/entity_index.py), so ingest need not write them after
    link = LinkFields.columns(dataset.entities.get_column("name")).drop("name")
    pl.concat(
        [
            dataset.entities.select(
                pl.col("id").alias(":ID(Entity)"),
                pl.col("id"),
                pl.lit(dataset.name).alias("dataset"),
                pl.col("name"),
            ),
            link,
        ],
        how="horizontal",
    ).write_csv(nodes)
    dataset.triples.select(
        pl.col("head").alias(":START_ID(Entity)"),
        pl.col("tail").alias(":END_ID(Entity)"),
        pl.col("relation").alias(":TYPE"),
    ).write_csv(rels)
    args = [f"--nodes=Entity={nodes}", f"--relationships={rels}"]
    delim = _delimiter(dataset.questions) if questions else None
    if delim is None:
        return ImportFiles(args)
    q = dataset.questions
    questions, links = folder / "questions.csv", folder / "links.csv"
    q.select(
        pl.col("id").alias(":ID(Question)"),
        pl.col("id"),
        pl.lit(dataset.name).alias("dataset"),
        pl.col("text"),
        pl.col("split"),
        pl.col("hops").alias("hops:int"),
        pl.col("topics").list.join(delim).alias("topic_ids:string[]"),
        pl.col("answers").list.join(delim).alias("answer_ids:string[]"),
    ).write_csv(questions)
    known = dataset.entities.select(pl.col("id").alias("e"))
    pairs = (
        pl.concat(
            [
                q.select("id", pl.col(col).alias("e"))
                .explode("e")
                .with_columns(pl.lit(kind).alias("t"))
                for col, kind in (("topics", "TOPIC"), ("answers", "ANSWER"))
            ]
        )
        .join(known, on="e", how="semi")
        .unique()
    )
    pairs.select(
        pl.col("id").alias(":START_ID(Question)"),
        pl.col("e").alias(":END_ID(Entity)"),
        pl.col("t").alias(":TYPE"),
    ).write_csv(links)
    args += [f"--nodes=Question={questions}", f"--relationships={links}"]
    members = 0
    if dataset.subgraphs is not None and not dataset.subgraphs.is_empty():
        # build_dataset kept only rows of kept questions and graph entities, unique: every
        # row is one relationship, no dangling ids for the importer to reject
        path = folder / "subgraphs.csv"
        dataset.subgraphs.select(
            pl.col("question").alias(":START_ID(Question)"),
            pl.col("entity").alias(":END_ID(Entity)"),
            pl.lit(IN_SUBGRAPH).alias(":TYPE"),
        ).write_csv(path)
        args.append(f"--relationships={path}")
        members = dataset.subgraphs.height
    return ImportFiles(args=args, delimiter=delim, questions=q.height, links=pairs.height + members)


def admin_import(files: ImportFiles, folder: Path) -> subprocess.CompletedProcess:
    """neo4j-admin database import full into the (stopped) local server's database."""
    return server.admin(
        "database",
        "import",
        "full",
        *files.args,
        *([f"--array-delimiter={files.delimiter}"] if files.delimiter else []),
        "--multiline-fields=true",
        f"--report-file={folder / 'import.report'}",
        "--overwrite-destination=true",
        "neo4j",
    )


def bulk_import(
    store: GraphStore,
    dataset: Dataset,
    echo: Callable[[str], None] = print,
    questions_csv: bool = True,
) -> writer.IngestReport:
    writer.validate_relations(dataset)
    _check_target(store)
    folder = cpr_home() / "import" / dataset.name
    files = write_csv(dataset, folder, questions_csv)
    store.close()
    echo("stopping the local server for neo4j-admin import ...")
    server.stop()
    result = admin_import(files, folder)
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
    questions_written = files.delimiter is not None
    report = writer.ingest(store, dataset, graph_written=True, questions_written=questions_written)
    report.created_nodes += dataset.entities.height + files.questions
    report.created_relationships += dataset.triples.height + files.links
    return report
