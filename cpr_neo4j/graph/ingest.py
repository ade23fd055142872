"""Write a loaded Dataset into Neo4j: idempotent MERGE batches, each batch one transaction.

Order: entities, relationships, Relation nodes, questions, TOPIC/ANSWER links, then the
Dataset record is marked complete, with the dataset's conventions (`topic_answers`: whether
a topic may be its own answer; loaders/topic_answers.py decides it when the loader did not).
Every write creates only what is missing (MERGE, or for relationships CREATE after a
check), so a killed run re-run from the start finishes the job and a second run creates
nothing. A dataset already in Neo4j is first compared with the files (graph/changes.py):
what they no longer hold is deleted, renamed entities renamed, changed questions written
again, and the fingerprint moves on (a resumable marker on the Dataset covers a killed run).

The graph, questions and links go in column batches (graph/columns.py): relationships of
every type through ONE statement, where a statement per type cost a plan compile and a
transaction per type and batch (a graph with 834 types ran at 549 triples/s).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import polars as pl

from cpr_neo4j.errors import BadInput
from cpr_neo4j.graph import changes, entity_index, fingerprint, records
from cpr_neo4j.graph.changes import Changes
from cpr_neo4j.graph.columns import write_entities, write_links, write_questions, write_triples
from cpr_neo4j.graph.cypher import rel_type, statement
from cpr_neo4j.graph.neighbours import DEFAULT_FANOUT_CAP
from cpr_neo4j.graph.schema import bootstrap
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.graph.subgraphs import membership_rows, write_subgraphs
from cpr_neo4j.loaders.base import Dataset
from cpr_neo4j.loaders.topic_answers import TopicAnswers, decide, decided

Progress = Callable[[str, int], None]  # (stage, rows just written)


@dataclass
class IngestReport:
    created_nodes: int = 0
    created_relationships: int = 0
    stages: dict[str, int] = field(default_factory=dict)  # rows sent per stage
    changes: Changes = field(default_factory=Changes)  # against what Neo4j held before
    fingerprint_before: str | None = None
    fingerprint: str = ""

    def add(self, stage: str, rows: int, counters) -> None:
        self.stages[stage] = self.stages.get(stage, 0) + rows
        self.created_nodes += counters.nodes_created
        self.created_relationships += counters.relationships_created


def validate_relations(dataset: Dataset) -> list[str]:
    """Every relation name, validated up front so a bad one aborts before any write."""
    names = dataset.triples.get_column("relation").unique().sort().to_list()
    for name in names:
        rel_type(name)
    return names


def _rows(df: pl.DataFrame) -> Iterator[dict]:
    return df.iter_rows(named=True)


def stage_sizes(dataset: Dataset) -> dict[str, int]:
    q = dataset.questions
    return {
        "entities": dataset.entities.height,
        "triples": dataset.triples.height,
        "relations": 2 * dataset.triples.get_column("relation").n_unique(),
        "questions": q.height,
        "links": int(q.get_column("topics").list.len().sum() or 0)
        + int(q.get_column("answers").list.len().sum() or 0),
        "subgraphs": membership_rows(dataset),
    }


def ingest(
    store: GraphStore,
    dataset: Dataset,
    batch_size: int = 10_000,
    progress: Progress | None = None,
    graph_written: bool = False,
    questions_written: bool = False,
) -> IngestReport:
    """MERGE everything; graph_written skips entities and triples, questions_written the
    questions and their links (a bulk import wrote them)."""
    relations = validate_relations(dataset)
    if dataset.triples.is_empty():
        raise BadInput(f"dataset {dataset.name!r} has no triples: nothing to ingest")
    bootstrap(store)
    name = dataset.name
    topic_answers = dataset.topic_answers
    if topic_answers is None:  # a caller that did not decide (the CLI does, and says so)
        topic_answers = decide(dataset)[1].on
    info = store.read("dataset_info", dataset=name)
    before = info[0]["d"] if info else {}
    # what the files change: removed and changed parts deleted first, the rest MERGEd below
    plan = changes.plan(store, dataset, topic_answers)
    report = IngestReport(changes=plan.changes, fingerprint_before=before.get("fingerprint"))
    tick = progress or (lambda stage, n: None)
    # a replace left unfinished (killed) bumps the fingerprint on the re-run too
    bump = (plan.changes.any() and not plan.changes.new_dataset) or bool(before.get("replacing"))
    if bump:
        store.write("dataset_replacing", dataset=name)
        changes.apply(store, plan, name, batch_size)
        store.write("clear_hub_lists", dataset=name)
    else:
        store.write("dataset_begin", dataset=name)

    def run(stage: str, text: str, rows: Iterator[dict]) -> None:
        for n, counters in store.write_batches(text, rows, batch_size, {"dataset": name}):
            report.add(stage, n, counters)
            tick(stage, n)

    if not graph_written:
        for n, counters in write_entities(store, dataset, batch_size):
            report.add("entities", n, counters)
            tick("entities", n)
        for n, counters in write_triples(store, dataset, relations, batch_size):
            report.add("triples", n, counters)
            tick("triples", n)
    text_of = dataset.relation_text
    rel_rows = [
        {"name": r, "direction": d, "text": text_of.get(r, r)}
        for r in relations
        for d in ("forward", "reverse")
    ]
    run("relations", statement("merge_relations"), iter(rel_rows))
    q = dataset.questions
    for stage, batches in (
        ()
        if questions_written
        else (
            ("questions", write_questions(store, dataset, batch_size)),
            ("links", write_links(store, dataset, "topics", batch_size)),
            ("links", write_links(store, dataset, "answers", batch_size)),
            ("subgraphs", write_subgraphs(store, dataset, batch_size)),  # IN_SUBGRAPH
        )
    ):
        for n, counters in batches:
            report.add(stage, n, counters)
            tick(stage, n)
    # each hub's capped neighbour list, so searches read it rather than sort its degree
    store.autocommit("hub_lists", dataset=name, cap=DEFAULT_FANOUT_CAP)
    store.write(
        "dataset_finish",
        dataset=name,
        props={
            "triples_source": dataset.triples.height,
            "entities_source": dataset.entities.height,
            "questions_source": q.height,
            "topic_answers": topic_answers,
            "replacing": None,  # removes the marker
        },
    )
    # a changed graph, or a changed topic-answer setting, makes older calibrations stale
    report.fingerprint = fingerprint.refresh(store, name, bump=bump)
    entity_index.ensure(store, name)  # the linker's stored index of names, for this graph
    return report


def unanswerable(dataset: Dataset) -> int:
    """Questions none of whose gold answers is an entity of the graph."""
    answered = (
        dataset.questions.select("id", "answers")
        .explode("answers")
        .join(dataset.entities.select(pl.col("id").alias("answers")), on="answers", how="semi")
        .get_column("id")
        .n_unique()
    )
    return dataset.questions.height - answered


@dataclass(frozen=True)
class UnknownIds:
    """Questions naming topics or gold answers that are not entity ids of the graph."""

    topics: int  # questions with a topic id not in the graph
    answers: int  # questions with a gold answer id not in the graph
    examples: list[str]  # the first few, as `question id: topic 'x' ...`


def unknown_ids(dataset: Dataset, shown: int = 3) -> UnknownIds:
    """Topics and answers are entity ids; a name there (entities.tsv's second column) links
    nothing, so say which it is."""
    ids = dataset.entities.select(pl.col("id").alias("ref"), pl.lit(True).alias("known"))
    names = dict(dataset.entities.select("name", "id").unique("name").iter_rows())
    found: dict[str, int] = {}
    examples: list[str] = []
    for role in ("topics", "answers"):
        refs = (
            dataset.questions.select("id", pl.col(role).alias("ref"))
            .explode("ref")
            .drop_nulls("ref")
            .join(ids, on="ref", how="left")
            .filter(pl.col("known").is_null())
        )
        found[role] = refs.get_column("id").n_unique()
        for qid, ref in refs.select("id", "ref").head(shown - len(examples)).iter_rows():
            hint = f" (the name of entity {names[ref]!r}: use ids)" if ref in names else ""
            examples.append(f"{qid}: {role[:-1]} {ref!r} is not an entity id of the graph{hint}")
    return UnknownIds(topics=found["topics"], answers=found["answers"], examples=examples)


def counts(store: GraphStore, dataset: str) -> dict:
    """Entities, triples, relations and questions per split, as stored in Neo4j."""
    rec = store.read("dataset_counts", dataset=dataset)[0]
    splits: dict[str, int] = {}
    for s in rec["splits"]:
        splits[s] = splits.get(s, 0) + 1
    return {
        "entities": rec["entities"],
        "triples": rec["triples"],
        "relations": rec["relations"],
        "questions": dict(sorted(splits.items())),
    }


@dataclass(frozen=True)
class Dropped:
    """What `drop` did: nodes of the dataset deleted, and its Ask, model and calibration records."""

    nodes: int
    asks: int  # deleted (0 when kept)
    models: list[str]  # ScoringModel ids: deleted, or marked stale when kept
    calibrations: list[str]
    models_deleted: bool


def drop(store: GraphStore, dataset: str, asks: bool = True, models: bool = True) -> Dropped:
    """Delete one dataset's Entity, Relation, Question and Dataset nodes, each batch its own
    transaction; asks: its (:Ask) records too; models: its ScoringModels and Calibrations
    (else marked as made on a dropped graph, so none serves a later ingest of the name).
    Nodes of other labels or datasets are never touched."""
    made = store.read("dataset_models", dataset=dataset)[0]
    nodes = store.autocommit_rows("delete_dataset", dataset=dataset)[0]["deleted"]
    gone = (
        store.autocommit_rows("delete_dataset_asks", dataset=dataset)[0]["deleted"] if asks else 0
    )
    if models:
        store.write("delete_dataset_models", dataset=dataset)
    else:
        store.write("mark_dataset_stale", dataset=dataset)
    return Dropped(
        nodes=nodes,
        asks=gone,
        models=list(made["models"]),
        calibrations=list(made["calibrations"]),
        models_deleted=models,
    )


def add_questions(
    store: GraphStore, dataset: Dataset, batch_size: int = 10_000, progress: Progress | None = None
) -> IngestReport:
    """Questions (and their TOPIC/ANSWER links) added to a dataset whose graph is already in
    Neo4j (`cpr ingest NAME --questions FILE`, e.g. from `cpr label`): the graph, its
    fingerprint and the dataset's settings are untouched, so models stay current. Questions
    already there (same id) are kept as they are (MERGE)."""
    records.require_dataset(store, dataset.name)
    report = IngestReport()
    tick = progress or (lambda stage, n: None)
    for stage, batches in (
        ("questions", write_questions(store, dataset, batch_size)),
        ("links", write_links(store, dataset, "topics", batch_size)),
        ("links", write_links(store, dataset, "answers", batch_size)),
    ):
        for n, counters in batches:
            report.add(stage, n, counters)
            tick(stage, n)
    # kept by a later re-ingest of the dataset's own files, which do not hold them
    ids = dataset.questions.get_column("id").to_list()
    for off in range(0, len(ids), batch_size):
        store.write("mark_questions_added", dataset=dataset.name, ids=ids[off : off + batch_size])
    return report


def settle_topic_answers(
    store: GraphStore, name: str, mode: str = "auto"
) -> tuple[TopicAnswers, bool]:
    """Whether a topic may be its own answer, once questions were added to a graph in Neo4j
    (`cpr ingest NAME --questions FILE`). A graph ingested without questions decided nothing
    ("auto" had no question to count), so "auto" decides now on every question the dataset
    holds; a graph ingested with questions keeps its decision; on/off set it. A change is
    written to the (:Dataset) record and its fingerprint refreshed: calibrations pin it.
    Returns the decision and whether it changed the setting."""
    info = records.require_dataset(store, name)
    was = bool(info.get("topic_answers"))
    row = store.read("questions_topic_answered", dataset=name)[0]
    n, total = int(row["with_topic"]), int(row["questions"])
    if mode == "auto" and info.get("questions_source"):
        decision = TopicAnswers(with_topic=n, questions=total, on=was,
                                why="decided when the graph was ingested with its questions; "
                                "--topic-answers on|off changes it")  # fmt: skip
    else:
        decision = decided(n, total, mode)
    changed = decision.on != was
    if changed:
        store.write("dataset_topic_answers", dataset=name, on=decision.on)
        fingerprint.refresh(store, name, bump=True)
    return decision, changed
