"""MetaQA (vanilla) over the WikiMovies KB.

KB lines `head|relation|tail`; question lines `text with [topic] \\t answer1|answer2`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import polars as pl

from cpr_neo4j.config import resource_dir
from cpr_neo4j.errors import BadInput
from cpr_neo4j.loaders.base import (
    SPLITS,
    Dataset,
    Problem,
    build_dataset,
    questions_frame,
    read_lines,
    split_fields,
)

# The original kb.txt wins over the bundled partial reconstruction when both are present.
_KB_FILES = ("kb.txt", "kb_partial_reconstructed.txt")
# Bundled / keallm layout first, then the original yuyuz/MetaQA layout (which has train too).
_QA_FILES = ("{h}-hop/{s}.txt", "{h}-hop/vanilla/qa_{s}.txt")
_MENTION = r"\[[^\]]+\]"  # as cpr_neo4j.text.bracket_mentions, vectorised


def bundled_root() -> Path:
    return resource_dir("data") / "metaqa"


def _find(root: Path, patterns: Iterable[str], what: str) -> Path:
    """The first existing candidate, plain or gzipped."""
    for pattern in patterns:
        for candidate in (root / pattern, root / f"{pattern}.gz"):
            if candidate.is_file():
                return candidate
    raise BadInput(f"MetaQA {what} not found under {root} (looked for {', '.join(patterns)}[.gz])")


def _questions(
    path: Path, hops: int, split: str, plain: bool = False
) -> tuple[pl.DataFrame, list[Problem]]:
    file = str(path)
    lines, problems = read_lines(path)
    rows, bad = split_fields(lines, "\t", ["text", "answers"], file)
    mentions = pl.col("text").str.extract_all(_MENTION)
    rows = rows.with_columns(
        pl.concat_str(pl.lit(f"{hops}hop-{split}-"), pl.col("line").cast(pl.Utf8)).alias("id"),
        pl.lit(split).alias("split"),
        pl.lit(hops, pl.Int32).alias("hops"),
        mentions.list.eval(
            pl.element().str.slice(1, pl.element().str.len_chars() - 2).str.strip_chars()
        ).alias("topics"),
        pl.col("answers").str.split("|").list.eval(pl.element().filter(pl.element() != "")),
        pl.lit(file).alias("_file"),
        pl.col("line").alias("_line"),
    )
    if plain:  # as people type: no [brackets]; the gold topics stay, for evaluation
        rows = rows.with_columns(pl.col("text").str.replace_all(r"[\[\]]", ""))
    ok = (pl.col("topics").list.len() > 0) & (pl.col("answers").list.len() > 0)
    bad += [
        Problem(file, line, "no [topic] mention in the question" if not t else "no answers")
        for line, t in rows.filter(~ok).select("line", pl.col("topics").list.len()).iter_rows()
    ]
    return rows.filter(ok), problems + bad


def load_metaqa(
    root: Path | None = None,
    hops: Iterable[int] = (1, 2, 3),
    splits: Iterable[str] = ("dev", "test"),
    strict: bool = False,
    kb: str = "bundled",
    plain: bool = False,
) -> Dataset:
    """MetaQA from `root` (default: the bundled copy). Entity names are their ids.

    kb="matched": the variant named `metaqa-matched` (loaders/metaqa_matched.py), whose
    1-hop test answers are in the KB no more often than dev's are. plain=True: the variant
    named `metaqa-plain`, its questions with the [brackets] removed (linked from the text)."""
    root = Path(root) if root is not None else bundled_root()
    if not root.is_dir():
        raise BadInput(f"MetaQA folder not found: {root}")
    hops, splits = tuple(hops), tuple(splits)
    if not set(hops) <= {1, 2, 3} or not set(splits) <= set(SPLITS):
        raise BadInput(
            f"MetaQA has hops 1, 2, 3 and splits {', '.join(SPLITS)}; got {hops} {splits}"
        )

    kb_file = _find(root, _KB_FILES, "KB")
    lines, problems = read_lines(kb_file)
    triples, bad = split_fields(lines, "|", ["head", "relation", "tail"], str(kb_file))
    problems += bad
    name, notes = "metaqa", []
    if kb == "matched":
        from cpr_neo4j.loaders.metaqa_matched import matched_triples

        triples, note = matched_triples(triples, root, _find)
        name, notes = "metaqa-matched", [note]
    elif kb != "bundled":
        raise BadInput(f"MetaQA KB variants: bundled, matched; got {kb!r}")
    if plain:
        name = f"{name}-plain"

    frames = [questions_frame()]
    for h in hops:
        for s in splits:
            patterns = [p.format(h=h, s=s) for p in _QA_FILES]
            found = _find(root, patterns, f"{h}-hop {s} questions")
            rows, bad = _questions(found, h, s, plain)
            frames.append(rows.select(frames[0].columns))
            problems += bad
    questions = pl.concat(frames, how="vertical_relaxed")
    dataset = build_dataset(name, str(root), triples, questions, problems, strict)
    for note in notes:
        print(note)
    # MetaQA's gold lists exclude the topic (its few exceptions are homonyms, e.g. the film
    # and the actor "Lemmy" are one entity): a topic never answers itself
    return replace(dataset, topic_answers=False)
