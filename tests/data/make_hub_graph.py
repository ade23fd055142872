"""A generic-loader graph with MetaQA's shape and bigger hubs, built from the bundled KB.

    python tests/data/make_hub_graph.py OUT [--copies 3] [--questions 400] [--seed 0]

writes OUT/triples.tsv.gz, OUT/entities.tsv.gz and OUT/questions.jsonl for

    cpr ingest metaqa-hubs --triples OUT/triples.tsv.gz --entities OUT/entities.tsv.gz \\
        --questions OUT/questions.jsonl

Construction (as tests/data/scaled_graph.py's, bench/scale.py's graph): `copies` copies of
the KB. Every entity gets a fresh id per copy (`id#c`) except the hubs, the tails of
HUB_RELATIONS that are never a head (genres, years, languages, tags, IMDb rating and vote
buckets), which every copy shares. So a hub's degree grows `copies`-fold (Drama: 4,016
edges in MetaQA, 12,048 with 3 copies; 8 hubs pass the 2,000-edge neighbour fan-out cap
instead of 2) while everything else keeps MetaQA's shape. Names are the original ids, so
question texts (which keep MetaQA's wording) mask as before.

Questions: a seeded sample of `questions` MetaQA 2-hop and as many 3-hop dev questions,
question i re-targeted to copy i mod `copies` (topics and answers mapped like entities),
split "dev" (a pool for random calibration/test splits), ids `ORIGINAL#c`. Gold answers
stay the copy's: where a question's path crosses a shared hub the graph has more true
answers (other copies' entities) than listed. The gold list is still a fixed function of
the question, which is all a coverage guarantee needs; it only makes sets look less precise.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import polars as pl

from cpr_neo4j.loaders.metaqa import load_metaqa

NAME = "metaqa-hubs"
HUB_RELATIONS = (
    "has_genre",
    "release_year",
    "in_language",
    "has_tags",
    "has_imdb_rating",
    "has_imdb_votes",
)
SEP = "#"  # copy suffix; no MetaQA id contains it (checked)


def _copied(col: str, hubs: pl.Series) -> pl.Expr:
    """Entity `col` as copy `copy` names it: a hub keeps its id, anything else gets `#copy`."""
    suffixed = pl.concat_str(pl.col(col), pl.lit(SEP), pl.col("copy").cast(pl.Utf8))
    return pl.when(pl.col(col).is_in(hubs.implode())).then(pl.col(col)).otherwise(suffixed)


def build(copies: int = 3, questions: int = 400, seed: int = 0) -> dict[str, pl.DataFrame]:
    """{'triples': head/relation/tail, 'entities': id/name, 'questions': the jsonl rows}."""
    if copies < 1 or questions < 1:
        raise ValueError("copies and questions must be at least 1")
    kb = load_metaqa(hops=(2, 3), splits=("dev",))
    triples = kb.triples.select("head", "relation", "tail")
    ids = pl.concat([triples["head"], triples["tail"]]).unique().sort()
    if ids.str.contains(SEP, literal=True).any():
        raise ValueError(f"entity ids contain {SEP!r}: copies could collide")
    tails = triples.filter(pl.col("relation").is_in(HUB_RELATIONS)).get_column("tail").unique()
    hubs = tails.filter(~tails.is_in(triples.get_column("head").implode()))
    cp = pl.DataFrame({"copy": range(copies)}, schema={"copy": pl.Int32})
    out_triples = (
        triples.join(cp, how="cross")
        .select(
            _copied("head", hubs).alias("head"), "relation", _copied("tail", hubs).alias("tail")
        )
        .unique(maintain_order=True)
    )
    entities = (
        ids.to_frame("id")
        .join(cp, how="cross")
        .select(_copied("id", hubs).alias("id"), pl.col("id").alias("name"))
        .unique("id", maintain_order=True)
    )
    q = kb.questions.filter(pl.col("answers").list.len() > 0).sort("id")
    picked = pl.concat(
        [q.filter(pl.col("hops") == h).sample(questions, seed=seed + h) for h in (2, 3)]
    ).with_row_index("i")
    picked = picked.with_columns((pl.col("i") % copies).cast(pl.Int32).alias("copy"))
    mapped = {
        col: picked.select("i", "copy", pl.col(col).alias("e"))
        .explode("e")
        .select("i", _copied("e", hubs).alias(col))
        .group_by("i", maintain_order=True)
        .agg(col)
        for col in ("topics", "answers")
    }
    rows = (
        picked.drop("topics", "answers")
        .join(mapped["topics"], on="i", how="left", maintain_order="left")
        .join(mapped["answers"], on="i", how="left", maintain_order="left")
        .select(
            pl.concat_str(pl.col("id"), pl.lit(SEP), pl.col("copy").cast(pl.Utf8)).alias("id"),
            pl.col("text").alias("question"),
            pl.lit("dev").alias("split"),
            "hops",
            "topics",
            "answers",
        )
    )
    return {"triples": out_triples, "entities": entities, "questions": rows}


def write(folder: Path, frames: dict[str, pl.DataFrame] | None = None, **opts) -> dict[str, Path]:
    """The files `cpr ingest NAME --triples --entities --questions` reads (of `frames`, as
    `build` makes them, or built now with `opts`)."""
    folder.mkdir(parents=True, exist_ok=True)
    frames = frames or build(**opts)
    paths = {"triples": folder / "triples.tsv.gz", "entities": folder / "entities.tsv.gz"}
    for key, path in paths.items():
        with gzip.open(path, "wb") as f:
            frames[key].write_csv(f, separator="\t", quote_style="never", include_header=False)
    paths["questions"] = folder / "questions.jsonl"
    with paths["questions"].open("w", encoding="utf-8") as f:
        for row in frames["questions"].iter_rows(named=True):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--questions", type=int, default=400, help="per hop count (2 and 3)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    for key, path in write(a.out, copies=a.copies, questions=a.questions, seed=a.seed).items():
        print(f"{key}: {path}")


if __name__ == "__main__":
    main()
