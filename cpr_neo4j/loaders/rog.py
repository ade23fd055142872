"""RoG-webqsp / RoG-cwq (Hugging Face `rmanluo/RoG-{name}`): one row per question with its graph.

Fields: id, question, answer [names], q_entity [names], a_entity [names],
graph [[head, relation, tail], ...] with entity names as ids. Parquet as published; JSON lines
in the same schema are read too. Gold answers are `a_entity` (the graph's answer entities, as
RoG's own truth paths use), falling back to `answer` when a row has none. Problems in parquet
files give the 1-based row number as their line.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cpr_neo4j.errors import BadInput, CprError
from cpr_neo4j.loaders.base import (
    Dataset,
    Problem,
    build_dataset,
    check_split,
    questions_frame,
    read_jsonl,
    split_from_name,
)

# No network where this was written, so no commit hash could be looked up: pin a commit of
# https://huggingface.co/datasets/rmanluo/RoG-{webqsp,cwq} here once one is verified.
PINNED_REVISION = "main"
NAMES = ("webqsp", "cwq")
DEFAULT_SPLIT = "test"  # file names that say no split: evaluation data, never trained on
_STR_LIST = pl.List(pl.Utf8)
RAW_SCHEMA = {
    "id": pl.Utf8,
    "question": pl.Utf8,
    "answer": _STR_LIST,
    "q_entity": _STR_LIST,
    "a_entity": _STR_LIST,
    "graph": pl.List(_STR_LIST),
}
_JSONL = (".jsonl", ".json", ".jsonl.gz", ".json.gz")


def _download(name: str, revision: str) -> Path:
    repo = f"rmanluo/RoG-{name}"
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(
            repo_id=repo, repo_type="dataset", revision=revision, allow_patterns=["*.parquet"]
        )
    except Exception as exc:  # offline, proxy, auth, hub errors: all mean "get the files yourself"
        raise CprError(
            f"cannot download {repo}@{revision} ({type(exc).__name__}; offline?): fetch its "
            f"parquet files where there is internet and run `cpr ingest {name} --from PATH`"
        ) from exc
    return Path(folder)


def _files(source: Path) -> list[Path]:
    """Parquet files of a file or folder; JSON lines only when there is no parquet."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise BadInput(f"file not found: {source}")
    found = sorted(p for p in source.rglob("*.parquet") if p.is_file())
    found = found or sorted(p for p in source.rglob("*") if p.name.endswith(_JSONL))
    if not found:
        raise BadInput(f"no .parquet or .jsonl files under {source}")
    return found


def _read_parquet(path: Path) -> pl.DataFrame:
    try:
        schema = pl.read_parquet_schema(path)
    except Exception as exc:
        raise BadInput(f"{path} is not a readable parquet file ({exc})".splitlines()[0]) from exc
    missing = [c for c in RAW_SCHEMA if c not in schema]
    if missing:
        raise BadInput(f"{path} lacks column(s) {', '.join(missing)} (RoG layout: {_layout()})")
    try:
        frame = pl.read_parquet(path, columns=list(RAW_SCHEMA)).cast(RAW_SCHEMA)
    except Exception as exc:
        message = f"{path}: unreadable rows or wrong column types ({exc})".splitlines()[0]
        raise BadInput(message) from exc
    return frame.with_row_index("_line", offset=1).with_columns(pl.col("_line").cast(pl.Int64))


def _layout() -> str:
    return ", ".join(RAW_SCHEMA)


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _read_jsonl(path: Path) -> tuple[pl.DataFrame, list[Problem]]:
    rows, problems = read_jsonl(path)
    cols: dict[str, list] = {c: [] for c in ["_line", *RAW_SCHEMA]}
    for line, obj in rows:
        missing = [c for c in RAW_SCHEMA if c not in obj]
        if missing:
            problems.append(Problem(str(path), line, f"missing key(s) {', '.join(missing)}"))
            continue
        lists = ("answer", "q_entity", "a_entity")
        if not (all(_is_str_list(obj[c]) for c in lists) and isinstance(obj["graph"], list)):
            problems.append(Problem(str(path), line, "answer/q_entity/a_entity/graph not lists"))
            continue
        cols["_line"].append(line)
        for c in ("id", "question"):
            cols[c].append(obj[c] if isinstance(obj[c], str) else None)
        for c in lists:
            cols[c].append(obj[c])
        # A malformed graph entry becomes null: the shared checks report it as for parquet.
        cols["graph"].append([t if _is_str_list(t) else None for t in obj["graph"]])
    return pl.DataFrame(cols, schema={"_line": pl.Int64, **RAW_SCHEMA}), problems


def _rows(raw: pl.DataFrame, file: str, split: str) -> tuple[pl.DataFrame, pl.DataFrame, list]:
    """(triples, questions, problems) of one file's rows."""
    ok = pl.col("id").fill_null("").ne("") & pl.col("question").fill_null("").ne("")
    problems = [
        Problem(file, n, "needs a non-empty id and question") for n in raw.filter(~ok)["_line"]
    ]
    raw = raw.filter(ok)
    fields = pl.col("graph").list.eval(pl.element().fill_null("") != "")
    good = pl.col("graph").list.len().fill_null(0).eq(3) & fields.list.all().fill_null(False)
    entries = raw.select("_line", "graph").filter(pl.col("graph").list.len() > 0).explode("graph")
    broken = entries.filter(~good).group_by("_line", maintain_order=True).len()
    problems += [
        Problem(file, n, f"{k} of its graph entries are not [head, relation, tail]")
        for n, k in broken.iter_rows()
    ]
    triples = entries.filter(good).select(
        *(pl.col("graph").list.get(i).alias(c) for i, c in enumerate(("head", "relation", "tail")))
    )
    answers = pl.col("a_entity").list.drop_nulls()
    questions = raw.select(
        "id",
        pl.col("question").alias("text"),
        pl.lit(split).alias("split"),
        pl.lit(None, pl.Int32).alias("hops"),
        pl.col("q_entity").list.drop_nulls().alias("topics"),
        pl.when(answers.list.len() > 0)
        .then(answers)
        .otherwise(pl.col("answer").list.drop_nulls())
        .alias("answers"),
        pl.lit(file).alias("_file"),
        "_line",
    )
    return triples, questions, problems


def load_rog(
    name: str,
    source: Path | None = None,
    revision: str = PINNED_REVISION,
    split: str | None = None,
    strict: bool = False,
) -> Dataset:
    """RoG-`name` from a local file/folder, or downloaded from the hub when `source` is None.

    split: for every file; None takes it from each file name (train / validation->dev / test).
    """
    if name not in NAMES:
        raise BadInput(f"unknown RoG dataset {name!r} (known: {', '.join(NAMES)})")
    split = check_split(split)
    root = Path(source) if source is not None else _download(name, revision)
    triples, questions, problems = [], [questions_frame()], []
    for path in _files(root):
        file = str(path)
        if path.name.endswith(_JSONL):
            raw, bad = _read_jsonl(path)
            problems += bad
        else:
            raw = _read_parquet(path)
        t, q, bad = _rows(raw, file, split or split_from_name(path) or DEFAULT_SPLIT)
        triples.append(t)
        questions.append(q.select(questions[0].columns).cast(questions[0].schema))
        problems += bad
    return build_dataset(
        name, str(root), pl.concat(triples), pl.concat(questions), problems, strict
    )
