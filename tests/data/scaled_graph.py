"""MetaQA-shaped graphs k times bigger: k copies that share the hubs, for bench/scale.py's
scale curve (and tests/test_scale.py).

Every entity gets a fresh id per copy (`id#c`; copy 0 keeps the original ids) except the
hubs (the tails of HUB_RELATIONS that are never a head), which all copies share, so a hub's
degree grows k-fold as it would in a bigger KB; question i is re-targeted to copy i mod k.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

HUB_RELATIONS = ("has_genre", "release_year", "in_language", "has_imdb_rating", "has_imdb_votes")
SEP = "#"  # copy suffix; no MetaQA id contains it (checked)


@dataclass
class Scaled:
    triples: pl.DataFrame  # head, relation, tail
    entities: pl.DataFrame  # id, name (the original id: names repeat across copies)
    questions: pl.DataFrame  # id, question, split, hops, topics, answers, copy


def hub_ids(triples: pl.DataFrame, relations: tuple[str, ...] = HUB_RELATIONS) -> pl.Series:
    """Tails of the hub relations that are never a head (a film titled "2010" stays a film)."""
    tails = triples.filter(pl.col("relation").is_in(relations)).get_column("tail").unique()
    return tails.filter(~tails.is_in(triples.get_column("head").implode()))


def _in_copy(col: str, hubs: pl.Series) -> pl.Expr:
    """Entity `col` as it is named in copy `copy`: hubs and copy 0 keep their id."""
    keep = pl.col(col).is_in(hubs.implode()) | (pl.col("copy") == 0)
    suffixed = pl.concat_str(pl.col(col), pl.lit(SEP), pl.col("copy").cast(pl.Utf8))
    return pl.when(keep).then(pl.col(col)).otherwise(suffixed).alias(col)


def scale_graph(
    triples: pl.DataFrame,
    questions: pl.DataFrame,
    copies: int,
    relations: tuple[str, ...] = HUB_RELATIONS,
) -> Scaled:
    """`copies` copies of the graph sharing its hubs; question i re-targeted to copy i mod k."""
    if copies < 1:
        raise ValueError("copies must be at least 1")
    ids = pl.concat([triples["head"], triples["tail"]]).unique()
    if ids.str.contains(SEP, literal=True).any():
        raise ValueError(f"entity ids contain {SEP!r}: copies could collide")
    hubs = hub_ids(triples, relations)
    cp = pl.DataFrame({"copy": range(copies)}, schema={"copy": pl.Int32})
    scaled = triples.join(cp, how="cross").select(
        _in_copy("head", hubs), "relation", _in_copy("tail", hubs)
    )
    entities = (
        ids.to_frame("id")
        .join(cp, how="cross")
        .select(_in_copy("id", hubs), pl.col("id").alias("name"))
        .unique("id", maintain_order=True)
    )
    q = questions.with_row_index("i").with_columns(
        (pl.col("i") % copies).cast(pl.Int32).alias("copy")
    )
    mapped = {
        col: q.select("i", "copy", pl.col(col).alias("e"))
        .explode("e")
        .select("i", _in_copy("e", hubs).alias(col))
        .group_by("i", maintain_order=True)
        .agg(col)
        for col in ("topics", "answers")
    }
    q = (
        q.drop("topics", "answers")
        .join(mapped["topics"], on="i", how="left", maintain_order="left")
        .join(mapped["answers"], on="i", how="left", maintain_order="left")
        .with_columns(_in_copy("id", hubs.clear()))
        .select(
            "id", pl.col("text").alias("question"), "split", "hops", "topics", "answers", "copy"
        )
    )
    return Scaled(scaled, entities, q)


def write_files(scaled: Scaled, folder: Path) -> dict[str, Path]:
    """The files `cpr ingest NAME --triples --entities --questions` reads."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {k: folder / f for k, f in (("triples", "triples.tsv"), ("entities", "entities.tsv"))}
    paths["questions"] = folder / "questions.jsonl"
    for key, frame in (("triples", scaled.triples), ("entities", scaled.entities)):
        frame.write_csv(paths[key], separator="\t", quote_style="never")
    scaled.questions.drop("copy").write_ndjson(paths["questions"])
    return paths
