"""The one shape every loader returns. Loaders read files with polars and know nothing of Neo4j."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from cpr_neo4j.errors import BadInput
from cpr_neo4j.text import readable_relation

TRIPLES_SCHEMA = {"head": pl.Utf8, "relation": pl.Utf8, "tail": pl.Utf8}
ENTITIES_SCHEMA = {"id": pl.Utf8, "name": pl.Utf8}
QUESTIONS_SCHEMA = {
    "id": pl.Utf8,
    "text": pl.Utf8,  # as in the source; MetaQA keeps its [topic] brackets
    "split": pl.Utf8,  # train | dev | test
    "hops": pl.Int32,  # null when the source does not say
    "topics": pl.List(pl.Utf8),  # topic entity ids
    "answers": pl.List(pl.Utf8),  # gold answer entity ids
}
# Per-question subgraph membership (RoG, NSM/GraftNet): which entities each question's own
# retrieved subgraph holds. The graph is the union; `--scope subgraph` answers inside these.
SUBGRAPHS_SCHEMA = {"question": pl.Utf8, "entity": pl.Utf8}


@dataclass(frozen=True)
class Problem:
    """A malformed input line, reported as file:line."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class Dataset:
    """A knowledge graph plus its questions.

    triples: unique (head, relation, tail) rows of entity ids.
    entities: unique (id, name) for every id used in triples (name = id when unknown).
    questions: one row per question, QUESTIONS_SCHEMA.
    relation_text: readable text per relation name ("directed_by" -> "directed by").
    problems: malformed lines skipped while reading.
    subgraphs: unique (question, entity) rows, SUBGRAPHS_SCHEMA; None when the source has no
        per-question subgraphs (MetaQA, plain triples).
    topic_answers: whether a topic entity may be its own answer (loaders/topic_answers.py);
        None when the loader does not know its dataset's convention: ingest detects it.
    """

    name: str
    triples: pl.DataFrame
    entities: pl.DataFrame
    questions: pl.DataFrame
    relation_text: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    subgraphs: pl.DataFrame | None = None
    topic_answers: bool | None = None


# --- helpers shared by the loaders -------------------------------------------------------------

SPLITS = ("train", "dev", "test")
GENERATED_SPLIT = "generated"  # training/generate.py's files: refused by every questions loader
_SPLIT_WORDS = {
    "train": "train",
    "training": "train",
    "dev": "dev",
    "val": "dev",
    "valid": "dev",
    "validation": "dev",
    "test": "test",
}
_INTERNAL = {"_file": pl.Utf8, "_line": pl.Int64}  # where each question came from, for Problems


def split_from_name(path: Path) -> str | None:
    """train/dev/test from names like `validation-00000-of-00001.parquet` or `dev_simple.jsonl`."""
    for word in re.split(r"[^a-z]+", path.name.lower()):
        if word in _SPLIT_WORDS:
            return _SPLIT_WORDS[word]
    return None


def check_split(split: str | None) -> str | None:
    """A caller's split word as train/dev/test ("validation" -> "dev"); None stays None."""
    if split is None:
        return None
    if split.lower() not in _SPLIT_WORDS:
        raise BadInput(f"unknown split {split!r} (use {', '.join(SPLITS)})")
    return _SPLIT_WORDS[split.lower()]


def require_file(path: Path) -> Path:
    if not path.is_file():
        raise BadInput(f"file not found: {path}")
    return path


def _gunzip(data: bytes) -> tuple[bytes, bool]:
    """Decompress every gzip member; True when the stream breaks off (what came before is kept)."""
    out: list[bytes] = []
    while data.strip(b"\0"):  # members may be concatenated; zero padding may follow
        stream = zlib.decompressobj(wbits=31)
        try:
            out.append(stream.decompress(data))
        except zlib.error:
            return b"".join(out), True
        if not stream.eof:
            return b"".join(out), True
        data = stream.unused_data
    return b"".join(out), False


def read_lines(path: Path) -> tuple[pl.DataFrame, list[Problem]]:
    """Non-blank lines of a plain or gzipped text file: columns `line` (1-based) and `text`.

    A truncated gzip keeps the lines before the break; bytes that are not UTF-8 spoil only their
    own line. Both are reported as Problems rather than raised, like any malformed line.
    """
    file = str(require_file(path))
    data = path.read_bytes()
    truncated = False
    if data[:2] == b"\x1f\x8b":
        data, truncated = _gunzip(data)
    try:
        text, bad_utf8 = data.decode("utf-8"), False
    except UnicodeDecodeError:
        text, bad_utf8 = data.decode("utf-8", errors="replace"), True
    lines = text.removeprefix("\ufeff").split("\n")
    problems = []
    if truncated:  # the text after the last newline is a partial line
        lines[-1] = ""
        problems.append(Problem(file, len(lines), "file ends early (truncated gzip); rest lost"))
    frame = (
        pl.DataFrame({"text": lines}, schema={"text": pl.Utf8})
        .with_row_index("line", offset=1)
        .with_columns(pl.col("line").cast(pl.Int64), pl.col("text").str.strip_suffix("\r"))
    )
    if bad_utf8:
        broken = pl.col("text").str.contains("\ufffd", literal=True)
        problems[:0] = [Problem(file, n, "not UTF-8 text") for n in frame.filter(broken)["line"]]
        frame = frame.filter(~broken)
    return frame.filter(pl.col("text").str.strip_chars() != ""), problems


def split_fields(
    lines: pl.DataFrame, sep: str, names: Sequence[str], file: str
) -> tuple[pl.DataFrame, list[Problem]]:
    """Split each line into exactly len(names) non-empty fields; other lines become Problems."""
    n = len(names)
    parts = lines.with_columns(pl.col("text").str.split(sep).alias("_f")).with_columns(
        pl.col("_f").list.len().alias("_n"),
        pl.col("_f").list.eval(pl.element() == "").list.any().alias("_empty"),
    )
    ok = (pl.col("_n") == n) & ~pl.col("_empty")
    problems = [
        Problem(
            file,
            line,
            f"expected {n} fields separated by {sep!r}, found {k}" if k != n else "empty field",
        )
        for line, k in parts.filter(~ok).select("line", "_n").iter_rows()
    ]
    fields = [pl.col("_f").list.get(i).alias(name) for i, name in enumerate(names)]
    return parts.filter(ok).select("line", *fields), problems


def read_jsonl(path: Path) -> tuple[list[tuple[int, dict]], list[Problem]]:
    """(line number, object) for each JSON-object line; bad JSON lines become Problems."""
    lines, problems = read_lines(path)
    file, rows = str(path), []
    for line, text in lines.iter_rows():
        try:
            obj = json.loads(text)
        except ValueError as exc:
            problems.append(Problem(file, line, f"bad JSON: {getattr(exc, 'msg', exc)}"))
            continue
        if isinstance(obj, dict):
            rows.append((line, obj))
        else:
            problems.append(Problem(file, line, "not a JSON object"))
    return rows, problems


def questions_frame(rows: list[dict] | None = None) -> pl.DataFrame:
    """Questions as loaders build them: QUESTIONS_SCHEMA plus `_file`/`_line`."""
    return pl.DataFrame(rows or [], schema={**QUESTIONS_SCHEMA, **_INTERNAL}, orient="row")


def build_dataset(
    name: str,
    source: str,
    triples: pl.DataFrame,
    questions: pl.DataFrame,
    problems: list[Problem],
    strict: bool = False,
    names: pl.DataFrame | None = None,
    subgraphs: pl.DataFrame | None = None,
    deduplicated: bool = False,
) -> Dataset:
    """The shared tail of every loader: dedupe, entities, relation text, --strict, empty graph.

    questions: QUESTIONS_SCHEMA plus `_file`/`_line` (duplicate ids are reported there).
    names: optional (id, name) rows; the first name that differs from its id wins.
    subgraphs: optional (question, entity) membership rows; kept for kept questions only.
    deduplicated: the loader's triples are unique and its membership rows unique, of kept
        questions and graph entities only (RoG's come from each row's own triples). Skips two
        joins and two uniques that at WebQSP's size (23M rows) cost gigabytes at their peak.
    """
    triples = triples.select(list(TRIPLES_SCHEMA)).cast(TRIPLES_SCHEMA)
    if not deduplicated:
        triples = triples.unique(maintain_order=True)
    first = pl.col("id").is_first_distinct()
    problems = problems + [
        Problem(file, line, f"duplicate question id {qid!r} (first kept)")
        for qid, file, line in questions.filter(~first).select("id", "_file", "_line").iter_rows()
    ]
    files = {f: i for i, f in enumerate(dict.fromkeys(p.file for p in problems))}
    problems.sort(key=lambda p: (files[p.file], p.line))  # file order, then line order
    if strict and problems:
        raise BadInput(
            f"bad input at {problems[0]} ({len(problems)} problem(s) in all; "
            "without --strict such lines are skipped)"
        )
    if triples.is_empty():
        raise BadInput(f"{name}: {source} has no triples")
    ids = pl.concat([triples["head"], triples["tail"]]).unique(maintain_order=True).to_frame("id")
    if names is not None and not names.is_empty():
        named = names.select(list(ENTITIES_SCHEMA)).cast(ENTITIES_SCHEMA)
        named = named.filter((pl.col("name") != "") & (pl.col("name") != pl.col("id")))
        named = named.unique("id", keep="first", maintain_order=True)
        ids = ids.join(named, on="id", how="left", maintain_order="left")
    else:
        ids = ids.with_columns(name=pl.lit(None, pl.Utf8))
    entities = ids.with_columns(pl.coalesce("name", "id").alias("name"))
    questions = questions.filter(first).with_columns(
        pl.col("topics").list.unique(maintain_order=True),
        pl.col("answers").list.unique(maintain_order=True),
    )
    relations = triples["relation"].unique(maintain_order=True)
    if subgraphs is not None:
        subgraphs = subgraphs.select(list(SUBGRAPHS_SCHEMA)).cast(SUBGRAPHS_SCHEMA)
        if not deduplicated:
            kept = questions.select(pl.col("id").alias("question"))
            subgraphs = (
                subgraphs.join(kept, on="question", how="semi")
                .join(ids.select(pl.col("id").alias("entity")), on="entity", how="semi")
                .unique(maintain_order=True)
            )
    return Dataset(
        name=name,
        triples=triples,
        entities=entities.select(list(ENTITIES_SCHEMA)),
        questions=questions.select(list(QUESTIONS_SCHEMA)).cast(QUESTIONS_SCHEMA),
        relation_text={r: readable_relation(r) for r in relations},
        problems=problems,
        subgraphs=subgraphs,
    )
