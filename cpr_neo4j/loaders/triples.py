"""A user's own graph: triples.tsv, optional entities.tsv and questions.jsonl.

triples.tsv: `head \\t relation \\t tail` (entity ids); entities.tsv: `id \\t name`;
questions.jsonl: `{"id", "question", "topics": [ids], "answers": [ids], "split"?, "hops"?}`.
A first line that is exactly the column names is taken as a header. Files may be gzipped.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cpr_neo4j.loaders.base import (
    GENERATED_SPLIT,
    SPLITS,
    Dataset,
    Problem,
    build_dataset,
    questions_frame,
    read_jsonl,
    read_lines,
    split_fields,
)
from cpr_neo4j.text import is_valid_rel_type


def _tsv(path: Path, names: list[str]) -> tuple[pl.DataFrame, list[Problem]]:
    lines, problems = read_lines(path)
    header = pl.col("text").str.to_lowercase() == "\t".join(names)
    lines = lines.filter(~((pl.col("line") == 1) & header))
    rows, bad = split_fields(lines, "\t", names, str(path))
    return rows, problems + bad


def _valid_relations(rows: pl.DataFrame, file: str) -> tuple[pl.DataFrame, list[Problem]]:
    """Lines whose relation cannot be a Neo4j relationship type become Problems (skipped)."""
    names = rows.get_column("relation").unique()
    bad = {n for n in names.to_list() if not is_valid_rel_type(n)}
    if not bad:
        return rows, []
    wrong = pl.col("relation").is_in(list(bad))
    problems = [
        Problem(file, line, f"relation {rel!r} is not allowed as a relationship type "
                "(letters, digits, _ . - : / and inner spaces only)")
        for line, rel in rows.filter(wrong).select("line", "relation").iter_rows()
    ]  # fmt: skip
    return rows.filter(~wrong), problems


def _is_ids(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def read_questions(path: Path) -> tuple[pl.DataFrame, list[Problem]]:
    """questions.jsonl rows (QUESTIONS_SCHEMA plus `_file`/`_line`) and malformed lines."""
    rows, problems = read_jsonl(path)
    file = str(path)
    q: list[dict] = []
    for line, obj in rows:
        qid, text = obj.get("id"), obj.get("question")
        split, hops = obj.get("split", "train"), obj.get("hops")
        reason = None
        if not (isinstance(qid, str) and qid and isinstance(text, str) and text):
            reason = "needs a non-empty 'id' and 'question'"
        elif not (_is_ids(obj.get("topics")) and _is_ids(obj.get("answers"))):
            reason = "'topics' and 'answers' must be lists of entity ids"
        elif split == GENERATED_SPLIT:
            reason = "generated questions are training data only (`cpr train --generated`)"
        elif split not in SPLITS:
            reason = f"'split' must be one of {', '.join(SPLITS)}"
        elif hops is not None and (type(hops) is not int or hops < 0):
            reason = "'hops' must be a whole number"
        if reason:
            problems.append(Problem(file, line, reason))
            continue
        q.append(
            {
                "id": qid,
                "text": text,
                "split": split,
                "hops": hops,
                "topics": obj["topics"],
                "answers": obj["answers"],
                "_file": file,
                "_line": line,
            }
        )
    return questions_frame(q), problems


def load_triples(
    name: str,
    triples: Path,
    entities: Path | None = None,
    questions: Path | None = None,
    strict: bool = False,
) -> Dataset:
    """A generic graph; entity names default to their ids."""
    rows, problems = _tsv(Path(triples), ["head", "relation", "tail"])
    rows, bad = _valid_relations(rows, str(triples))
    problems += bad
    names = None
    if entities is not None:
        names, bad = _tsv(Path(entities), ["id", "name"])
        problems += bad
    qs = questions_frame()
    if questions is not None:
        qs, bad = read_questions(Path(questions))
        problems += bad
    return build_dataset(name, str(triples), rows, qs, problems, strict, names)
