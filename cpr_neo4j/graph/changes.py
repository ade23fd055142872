"""What a re-ingest changes in a dataset already in Neo4j, and the deletions that make the
dataset what its files now say (ingest's MERGEs then write what is new).

The files are compared with what Neo4j holds, not with a record of the last ingest, so a
killed replace re-run finds exactly what is left to do. Entities are keyed by id (a new
name is a rename), triples by (head, relation, tail), questions by id (a question whose
text, split, hops, topics or answers changed is deleted and written again; one that the
files do not hold is deleted unless `cpr ingest NAME --questions FILE` added it). Per-question
subgraph memberships are not compared: a changed question gets its new ones, and an
entity removed takes its own with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.loaders.base import Dataset

SHOWN = 3  # renamed entities and changed questions named in the report


@dataclass
class Changes:
    """Counts of what a (re-)ingest adds, removes and changes; examples name a few."""

    new_dataset: bool = False
    entities_added: int = 0
    entities_removed: int = 0
    entities_renamed: int = 0
    triples_added: int = 0
    triples_removed: int = 0
    relations_added: int = 0
    relations_removed: int = 0
    questions_added: int = 0
    questions_removed: int = 0
    questions_changed: int = 0
    questions_kept: int = 0  # added by `cpr ingest NAME --questions FILE`, not in the files
    topic_answers: tuple[bool | None, bool] | None = None  # (before, now) when it changed
    examples: list[str] = field(default_factory=list)

    def any(self) -> bool:
        counts = (
            self.entities_added, self.entities_removed, self.entities_renamed,
            self.triples_added, self.triples_removed, self.relations_added,
            self.relations_removed, self.questions_added, self.questions_removed,
            self.questions_changed,
        )  # fmt: skip
        return any(counts) or self.topic_answers is not None

    def line(self) -> str:
        """One line: `entities +1 -1 (1 renamed); triples +0 -1; ...`."""
        parts = [
            f"entities +{self.entities_added} -{self.entities_removed} "
            f"({self.entities_renamed} renamed)",
            f"triples +{self.triples_added} -{self.triples_removed}",
            f"relation types +{self.relations_added} -{self.relations_removed}",
            f"questions +{self.questions_added} -{self.questions_removed} "
            f"({self.questions_changed} changed: text, split, hops, topics or answers)",
        ]
        if self.questions_kept:
            parts.append(f"{self.questions_kept} question(s) added with --questions alone kept")
        if self.topic_answers is not None:
            before, now = (
                "unset" if v is None else "on" if v else "off" for v in self.topic_answers
            )
            parts.append(f"topic answers {before} -> {now}")
        return "; ".join(parts)


@dataclass(kw_only=True)  # built by keyword: many fields
class Plan:
    """The deletions and renames that turn the stored dataset into the files' one."""

    changes: Changes
    triples: pl.DataFrame  # head, relation, tail to delete
    entities: list[str]  # ids to delete
    renames: pl.DataFrame  # id, name
    questions: list[str]  # ids to delete (removed, or changed: written again)
    relations: list[str]  # relation names to delete

    def deletes(self) -> bool:
        return bool(self.triples.height or self.entities or self.renames.height
                    or self.questions or self.relations)  # fmt: skip


def _anti(a: pl.DataFrame, b: pl.DataFrame, on: list[str]) -> pl.DataFrame:
    return a.join(b, on=on, how="anti", nulls_equal=True)


def _frame(rows: list, schema: dict) -> pl.DataFrame:
    return pl.DataFrame([dict(r) for r in rows], schema=schema, orient="row")


def plan(store: GraphStore, dataset: Dataset, topic_answers: bool) -> Plan:
    """Compare the files (`dataset`) with what Neo4j holds of the dataset of that name."""
    name = dataset.name
    info = store.read("dataset_info", dataset=name)
    empty = Plan(
        changes=Changes(),
        triples=dataset.triples.clear(),
        entities=[],
        renames=pl.DataFrame(schema={"id": pl.Utf8, "name": pl.Utf8}),
        questions=[],
        relations=[],
    )
    if not info:
        c = empty.changes
        c.new_dataset = True
        c.entities_added, c.triples_added = dataset.entities.height, dataset.triples.height
        c.relations_added = dataset.triples.get_column("relation").n_unique()
        c.questions_added = dataset.questions.height
        return empty
    was = info[0]["d"].get("topic_answers")
    c = empty.changes
    if was is not None and bool(was) != topic_answers:
        c.topic_answers = (bool(was), topic_answers)
    ents = _frame(store.read("stored_entities", dataset=name), {"id": pl.Utf8, "name": pl.Utf8})
    new_ents = dataset.entities.select("id", "name")
    removed_e = _anti(ents, new_ents, ["id"]).get_column("id").to_list()
    c.entities_added = _anti(new_ents, ents, ["id"]).height
    c.entities_removed = len(removed_e)
    renames = new_ents.join(ents, on="id", how="inner", suffix="_was").filter(
        pl.col("name") != pl.col("name_was")
    )
    c.entities_renamed = renames.height
    c.examples += [f"entity {i!r}: {w!r} -> {n!r}" for i, n, w in renames.head(SHOWN).iter_rows()]

    keys = ["head", "relation", "tail"]
    schema = {k: pl.Utf8 for k in keys}
    stored = _frame(store.read("stored_triples", dataset=name), schema)
    new_t = dataset.triples.select(keys)
    gone_t = _anti(stored, new_t, keys)
    # an entity removed takes its triples with it: only the others need a delete
    gone_t_alone = gone_t.filter(
        ~pl.col("head").is_in(removed_e) & ~pl.col("tail").is_in(removed_e)
    )
    c.triples_added = _anti(new_t, stored, keys).height
    c.triples_removed = gone_t.height
    rels_was = set(r["name"] for r in store.read("relations", dataset=name))
    rels_now = set(new_t.get_column("relation").unique().to_list())
    c.relations_added, c.relations_removed = len(rels_now - rels_was), len(rels_was - rels_now)

    q_schema = {"id": pl.Utf8, "text": pl.Utf8, "split": pl.Utf8, "hops": pl.Int32,
                "topics": pl.List(pl.Utf8), "answers": pl.List(pl.Utf8)}  # fmt: skip
    rows = store.read("questions", dataset=name, split=None, hops=None)
    q_was = _frame(rows, q_schema)
    q_now = dataset.questions.select(list(q_schema)).cast(q_schema)
    both = q_now.join(q_was, on="id", how="inner", suffix="_was")
    cols = [k for k in q_schema if k != "id"]
    differs = pl.any_horizontal(pl.col(k).ne_missing(pl.col(f"{k}_was")) for k in cols)
    changed = both.filter(differs)
    added = pl.DataFrame(  # one column of ids (a row of a bare string would be its letters)
        {"id": [r["id"] for r in store.read("added_questions", dataset=name)]},
        schema={"id": pl.Utf8},
    )
    removed_q = _anti(_anti(q_was, q_now, ["id"]), added, ["id"]).get_column("id").to_list()
    c.questions_kept = _anti(added, q_now, ["id"]).height
    c.questions_added = _anti(q_now, q_was, ["id"]).height
    c.questions_removed = len(removed_q)
    c.questions_changed = changed.height
    for row in changed.head(SHOWN).iter_rows(named=True):
        what = ", ".join(
            f"{k} {row[k + '_was']!r} -> {row[k]!r}" for k in cols if row[k] != row[k + "_was"]
        )
        c.examples.append(f"question {row['id']!r}: {what}")
    return Plan(
        changes=c,
        triples=gone_t_alone,
        entities=removed_e,
        renames=renames.select("id", "name"),
        questions=removed_q + changed.get_column("id").to_list(),
        relations=sorted(rels_was - rels_now),
    )


def apply(store: GraphStore, p: Plan, dataset: str, batch_size: int) -> None:
    """The deletions and renames (each batch its own transaction; all idempotent)."""

    def batches(n: int):
        return range(0, n, batch_size)

    t = p.triples
    for off in batches(t.height):
        part = t.slice(off, batch_size)
        store.write("delete_triples_cols", dataset=dataset, h=part["head"].to_list(),
                    r=part["relation"].to_list(), t=part["tail"].to_list())  # fmt: skip
    for off in batches(len(p.entities)):
        store.write("delete_entities_cols", dataset=dataset, ids=p.entities[off : off + batch_size])
    for off in batches(p.renames.height):
        part = p.renames.slice(off, batch_size)
        store.write("rename_entities_cols", dataset=dataset, ids=part["id"].to_list(),
                    names=part["name"].to_list())  # fmt: skip
    for off in batches(len(p.questions)):
        store.write("delete_questions_cols", dataset=dataset,
                    ids=p.questions[off : off + batch_size])  # fmt: skip
    if p.relations:
        store.write("delete_relations", dataset=dataset, names=p.relations)
