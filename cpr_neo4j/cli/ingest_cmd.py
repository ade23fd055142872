"""`cpr ingest NAME`: load a dataset's graph and questions into Neo4j."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cpr_neo4j.cli.common import console, err_console, open_store, progress_bar, table
from cpr_neo4j.errors import BadInput

SHOWN = 3  # bad lines and unknown ids printed; all are counted

if TYPE_CHECKING:
    from cpr_neo4j.loaders.base import Dataset


def _identity_rows(name: str, dataset: Dataset, source: Path | None) -> list[list]:
    """What merging entities by name did: RoG names entities, so a name is one node."""
    from cpr_neo4j.loaders.rog import NAMES, identity_counts

    ids = identity_counts(dataset, source if name in NAMES else None)
    rows: list[list] = []
    if ids["shared"] is not None:
        rows.append(["entity nodes shared by 2+ questions' subgraphs", ids["shared"], ""])
    if name in NAMES:
        known = ids["homonyms"] is not None
        rows.append(
            [
                "names standing for 2+ MIDs (merged into one node)",
                f"{ids['homonyms']} ({ids['mids']} MIDs)" if known else "unknown: names only",
                "",
            ]
        )
    return rows


def _read_property_graph(
    name: str,
    name_props: tuple[str, ...],
    key_props: tuple[str, ...],
    labels: str | None,
    rel_types: str | None,
    questions: Path | None,
    strict: bool,
):
    from cpr_neo4j.graph.property_graph import GraphSpec, label_pairs, names_list, read_graph
    from cpr_neo4j.loaders.triples import read_questions

    spec = GraphSpec(
        names=label_pairs(name_props, "--name-property"),
        keys=label_pairs(key_props, "--key"),
        labels=names_list(labels),
        rel_types=names_list(rel_types),
    )
    qs, problems = read_questions(questions) if questions else (None, [])
    with open_store() as store:
        return read_graph(store, name, spec, qs, problems, strict)


@click.command()
@click.argument("name")
@click.option(
    "--from",
    "source",
    type=click.Path(path_type=Path),
    help="Local copy of the dataset files (needed offline for webqsp/cwq).",
)
@click.option(
    "--triples", type=click.Path(path_type=Path), help="Your own graph: head<TAB>relation<TAB>tail."
)
@click.option("--entities", type=click.Path(path_type=Path), help="With --triples: id<TAB>name.")
@click.option(
    "--questions",
    type=click.Path(path_type=Path),
    help="questions.jsonl: with --triples, the dataset's questions; alone, questions added "
    "to a dataset already in Neo4j (e.g. from `cpr label`).",
)
@click.option(
    "--from-neo4j",
    "from_neo4j",
    is_flag=True,
    help="Your own property graph, already in the Neo4j cpr uses (the local server or "
    "NEO4J_URI): copied into cpr's schema; your nodes and relationships are only read.",
)
@click.option(
    "--name-property",
    "name_props",
    multiple=True,
    metavar="LABEL=PROP",
    help="With --from-neo4j: the property that names nodes of LABEL (default: name, else "
    "title, else the node's id); repeat per label.",
)
@click.option(
    "--key",
    "key_props",
    multiple=True,
    metavar="LABEL=PROP",
    help="With --from-neo4j: a property unique per node of LABEL, used as its id "
    "(`LABEL:value`, stable across a reload of your graph; default: the element id).",
)
@click.option("--labels", help="With --from-neo4j: keep only nodes with one of these labels (A,B).")
@click.option(
    "--rel-types", help="With --from-neo4j: keep only relationships of these types (A,B)."
)
@click.option(
    "--strict", is_flag=True, help="Abort before writing anything if any line is malformed."
)
@click.option(
    "--bulk", is_flag=True, help="neo4j-admin import into the local server (empty database only)."
)
@click.option("--batch-size", default=10_000, show_default=True)
@click.option(
    "--as",
    "store_as",
    metavar="DATASET",
    help="Store under this dataset name (e.g. a filtered or re-split copy of a known dataset).",
)
@click.option(
    "--hash-split",
    metavar="TRAIN,DEV,TEST",
    help="Re-assign every question's split by a hash of its id, in these shares (e.g. 70,0,30):"
    " reproducible, for sources with a single split such as the webqsp-nsm sample.",
)
@click.option(
    "--answerable",
    is_flag=True,
    help="Keep only questions with a gold answer inside their own subgraph (else the graph); "
    "the graph keeps every question's triples.",
)
@click.option(
    "--topic-answers",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="May a topic entity be its own answer (\"X's children's mother\" = X)? auto: the "
    "dataset's known convention (metaqa: off), else on when >= 1% of questions have a topic "
    "among their gold answers. Recorded on the dataset; changing it makes models stale.",
)
def ingest(
    name: str,
    source: Path | None,
    triples: Path | None,
    entities: Path | None,
    questions: Path | None,
    strict: bool,
    bulk: bool,
    batch_size: int,
    store_as: str | None,
    hash_split: str | None,
    answerable: bool,
    topic_answers: str,
    from_neo4j: bool,
    name_props: tuple[str, ...],
    key_props: tuple[str, ...],
    labels: str | None,
    rel_types: str | None,
) -> None:
    """Load dataset NAME (metaqa, metaqa-plain, metaqa-matched, webqsp, cwq, webqsp-nsm, or
    any name with --triples) into Neo4j.

    Idempotent and resumable: re-running creates nothing new and completes a killed run.
    Re-run on changed files, it replaces what changed (entities, triples, questions) and
    reports it; models and calibrations made before go stale. `cpr drop NAME` removes one.
    """
    # polars and the driver: only when ingesting, not for `cpr --help`
    from cpr_neo4j.graph import ingest as writer
    from cpr_neo4j.graph.bulk import bulk_import
    from cpr_neo4j.loaders import registry
    from cpr_neo4j.loaders.registry import load_dataset
    from cpr_neo4j.loaders.topic_answers import decide
    from cpr_neo4j.loaders.triples import load_triples

    began = time.monotonic()
    graph_options = bool(name_props or key_props or labels or rel_types)
    if graph_options and not from_neo4j:
        raise BadInput("--name-property, --key, --labels and --rel-types need --from-neo4j")
    if questions and not (triples or entities or source or from_neo4j):
        _add_questions(name, questions, strict, batch_size, topic_answers)
        return
    read = None
    if from_neo4j:
        if triples or entities or source or bulk:
            raise BadInput("--from-neo4j reads the graph from Neo4j: leave out --triples, "
                           "--entities, --from and --bulk")  # fmt: skip
        read = _read_property_graph(
            name, name_props, key_props, labels, rel_types, questions, strict
        )
        dataset = read.dataset
    elif triples:
        dataset = load_triples(name, triples, entities, questions, strict=strict)
    elif entities:
        raise BadInput("--entities needs --triples")
    else:
        dataset = load_dataset(name, source, strict=strict)
    if answerable:
        dataset = registry.answerable_only(dataset)
    if hash_split:
        dataset = registry.hash_split(dataset, registry.parse_shares(hash_split))
    if store_as:
        dataset = replace(dataset, name=store_as)
    dataset, convention = decide(dataset, topic_answers)  # on the questions ingested
    loaded = time.monotonic() - began
    if dataset.problems:
        first = dataset.problems[:SHOWN]
        err_console.print(
            f"skipped {len(dataset.problems)} malformed line(s) (--strict refuses them); "
            f"{'first ' + str(len(first)) if len(dataset.problems) > SHOWN else 'all'}:",
            style="yellow",
        )
        for p in first:
            err_console.print(
                f"  {p}", style="yellow", markup=False, highlight=False, soft_wrap=True
            )
    unknown = writer.unknown_ids(dataset, SHOWN)
    if unknown.examples:
        err_console.print(
            f"{unknown.topics} question(s) name a topic and {unknown.answers} a gold answer "
            "that is not an entity id of the graph; first:",
            style="yellow",
        )
        for line in unknown.examples:
            err_console.print(
                f"  {line}", style="yellow", markup=False, highlight=False, soft_wrap=True
            )
    writer.validate_relations(dataset)
    console.print(convention.message())
    with open_store() as store:
        t0 = time.monotonic()
        if bulk:
            report = bulk_import(store, dataset, echo=err_console.print)
        else:
            sizes = {s: n for s, n in writer.stage_sizes(dataset).items() if n or s != "subgraphs"}
            with progress_bar() as bar:
                tasks = {s: bar.add_task(s, total=n) for s, n in sizes.items()}
                report = writer.ingest(
                    store,
                    dataset,
                    batch_size=batch_size,
                    progress=lambda s, n: bar.advance(tasks[s], n),
                )
        wrote = time.monotonic() - t0
        stored = writer.counts(store, dataset.name)
    rows = [
        ["entities", dataset.entities.height, stored["entities"]],
        ["triples", dataset.triples.height, stored["triples"]],
        ["relations", dataset.triples.get_column("relation").n_unique(), stored["relations"]],
    ]
    src_splits = dict(dataset.questions.group_by("split").len().iter_rows())
    for split, n in stored["questions"].items():
        rows.append([f"questions ({split})", src_splits.get(split, 0), n])
    rows.append(["questions without a gold answer in the graph", writer.unanswerable(dataset), ""])
    rows.append(["questions with a topic not in the graph", unknown.topics, ""])
    rows.append(["questions with a gold answer not in the graph", unknown.answers, ""])
    if dataset.subgraphs is not None:
        rows.append(["subgraph memberships (question, entity)", dataset.subgraphs.height, ""])
    if read is not None:
        rows.append(["nodes read (with or without relationships)", read.nodes, ""])
        rows += [[f"  :{label}", n, ""] for label, n in read.per_label.items()]
        for label, n in read.unnamed.items():
            rows.append([f"  :{label} with no name property (named by id)", n, ""])
    else:
        rows += _identity_rows(name, dataset, source)
    rows.append(["malformed lines skipped", len(dataset.problems), ""])
    console.print(table(f"{dataset.name}: source vs Neo4j", ["", "source", "in Neo4j"], rows))
    console.print(
        f"created {report.created_nodes} nodes and {report.created_relationships} "
        f"relationships; read {loaded:.1f} s, wrote {wrote:.1f} s "
        f"({dataset.triples.height / max(wrote, 1e-9):,.0f} triples/s overall)"
    )
    for line in change_lines(dataset.name, report):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def change_lines(name: str, report) -> list[str]:
    """What the ingest changed against what Neo4j held, and whether models went stale: a
    moved fingerprint is never reported as no change."""
    c = report.changes
    moved = (
        report.fingerprint_before is not None and report.fingerprint != report.fingerprint_before
    )
    if c.new_dataset:
        return [
            f"new dataset {name}: {c.entities_added} entities, {c.triples_added} triples, "
            f"{c.relations_added} relation types, {c.questions_added} questions "
            f"(graph {report.fingerprint})"
        ]
    lines = []
    if c.any():
        lines.append(f"replaced {name} with what its files now hold: {c.line()}")
        lines += [f"  {e}" for e in c.examples]
    if moved:
        lines.append(
            f"graph fingerprint {report.fingerprint_before} -> {report.fingerprint}: models "
            f"and calibrations made before are stale (`cpr train {name}`, then `cpr calibrate "
            f"{name}`)"
        )
    if not lines:
        kept = c.questions_kept
        plus = f"; {kept} question(s) added with --questions alone kept" if kept else ""
        lines.append(
            f"no changes: {name} in Neo4j matches its files (graph {report.fingerprint}){plus}"
        )
    return lines


def _add_questions(name: str, path: Path, strict: bool, batch_size: int, mode: str) -> None:
    """`cpr ingest NAME --questions FILE` on a dataset already in Neo4j."""
    import polars as pl

    from cpr_neo4j.graph import ingest as writer
    from cpr_neo4j.loaders.base import ENTITIES_SCHEMA, QUESTIONS_SCHEMA, TRIPLES_SCHEMA, Dataset
    from cpr_neo4j.loaders.triples import read_questions

    qs, problems = read_questions(path)
    if problems:
        if strict:
            raise BadInput(
                f"{len(problems)} malformed line(s), nothing written; first: {problems[0]}"
            )
        err_console.print(
            f"[yellow]skipped {len(problems)} malformed line(s); first: {problems[0]}[/yellow]"
        )
    if qs.is_empty():
        raise BadInput(f"no question to add in {path}")
    qs = qs.unique("id", keep="first", maintain_order=True).select(list(QUESTIONS_SCHEMA))
    none = pl.DataFrame(schema=TRIPLES_SCHEMA)
    dataset = Dataset(
        name=name, triples=none, entities=pl.DataFrame(schema=ENTITIES_SCHEMA), questions=qs
    )
    with open_store() as store:
        report = writer.add_questions(store, dataset, batch_size)
        convention, changed = writer.settle_topic_answers(store, name, mode)
        stored = writer.counts(store, name)
    splits = ", ".join(f"{n} {s}" for s, n in stored["questions"].items())
    console.print(
        f"added {report.stages.get('questions', 0)} question(s) from {path} to {name!r} "
        f"({report.created_nodes} new; questions now: {splits}); the graph is unchanged"
    )
    console.print(convention.message())
    if changed:
        console.print(
            f"topic answers turned {'on' if convention.on else 'off'} for {name!r}: "
            "calibrations made before no longer fit (run `cpr calibrate` again)"
        )
    console.print(f"next: cpr train {name} (or cpr calibrate {name} with a model trained on none)")
