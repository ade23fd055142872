"""A generic-loader dataset whose gold answers often include the topic, over the MetaQA KB.

    python tests/data/make_topic_answers.py [--questions tests/data/topic_answers.jsonl]
        [--triples OUT/triples.tsv.gz] [--per-template 200] [--seed 0]

writes the questions (train/dev/test; the committed tests/data/topic_answers.jsonl is this
script's default output) and, with --triples, the bundled MetaQA KB as the generic loader's
head<TAB>relation<TAB>tail (1.3 MB gzipped, so generated rather than committed), for

    cpr ingest topic-answers --triples OUT/triples.tsv.gz --questions tests/data/topic_answers.jsonl

Every question follows a relation path from its topic, and its gold answers are ALL the
path's ends, the topic included when the path leads back to it: "who directed the movies
directed by [X]" answers X and X's co-directors (the convention of datasets that answer
"X's children's mother" with X, unlike MetaQA, whose gold lists drop the topic). Cyclic
templates (a relation and then its inverse) reach the topic by construction; the others
reach it only by accident, as real questions do. Topics are a seeded sample of the
entities with 1..MAX_ANSWERS answers (hubs would make huge gold lists); ids are
"template:topic", so they are stable; splits are a seeded 60/20/20 draw per question.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from collections import defaultdict
from pathlib import Path

from cpr_neo4j.loaders.metaqa import load_metaqa

QUESTIONS = Path(__file__).with_name("topic_answers.jsonl")
MAX_ANSWERS = 30
# name, question text ("{}" = the topic), relation path (relation, forward?) from the topic
TEMPLATES = [
    (
        "codirectors",
        "who directed the movies directed by [{}]",
        [("directed_by", False), ("directed_by", True)],
    ),
    (
        "costars",
        "which actors starred in the movies [{}] starred in",
        [("starred_actors", False), ("starred_actors", True)],
    ),
    (
        "cowriters",
        "who wrote the movies written by [{}]",
        [("written_by", False), ("written_by", True)],
    ),
    (
        "same_director",
        "which movies were directed by the director of [{}]",
        [("directed_by", True), ("directed_by", False)],
    ),
    (
        "same_writer",
        "which movies were written by the writer of [{}]",
        [("written_by", True), ("written_by", False)],
    ),
    (
        "director_actors",
        "which actors starred in the movies directed by [{}]",
        [("directed_by", False), ("starred_actors", True)],
    ),
    ("directed", "what movies did [{}] direct", [("directed_by", False)]),
    ("movie_director", "who directed [{}]", [("directed_by", True)]),
    ("movie_actors", "who starred in [{}]", [("starred_actors", True)]),
]
SPLITS = (("train", 0.6), ("dev", 0.2), ("test", 0.2))


def _adjacency(triples: list[tuple[str, str, str]]) -> dict[tuple[str, bool], dict[str, set]]:
    adj: dict[tuple[str, bool], dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for h, r, t in triples:
        adj[r, True][h].add(t)
        adj[r, False][t].add(h)
    return adj


def _ends(adj, start: str, path) -> set[str]:
    """Every entity at the end of the relation path from `start` (the start itself included
    when the path comes back to it)."""
    frontier = {start}
    for step in path:
        frontier = {v for u in frontier for v in adj[step].get(u, ())}
    return frontier


def questions(per_template: int = 200, seed: int = 0) -> tuple[list[tuple], list[dict]]:
    """(KB triples, question rows)."""
    kb = load_metaqa(hops=(1,), splits=("dev",))
    triples = sorted(kb.triples.iter_rows())
    adj = _adjacency(triples)
    rng = random.Random(seed)
    rows = []
    for name, text, path in TEMPLATES:
        starts = sorted(adj[path[0]])
        rng.shuffle(starts)
        taken = 0
        for topic in starts:
            if taken == per_template:
                break
            answers = _ends(adj, topic, path)
            if not 1 <= len(answers) <= MAX_ANSWERS:
                continue
            taken += 1
            u, split = rng.random(), "test"
            acc = 0.0
            for s, share in SPLITS:
                acc += share
                if u < acc:
                    split = s
                    break
            rows.append(
                {
                    "id": f"{name}:{topic}",
                    "question": text.format(topic),
                    "topics": [topic],
                    "answers": sorted(answers),
                    "split": split,
                    "hops": len(path),
                }
            )
    return triples, rows


def write(questions_path: Path, triples_path: Path | None = None, **opts) -> list[dict]:
    """Write the questions (and, given a path, the KB as TSV); returns the question rows."""
    triples, rows = questions(**opts)
    questions_path.parent.mkdir(parents=True, exist_ok=True)
    with questions_path.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if triples_path is not None:
        write_triples(triples_path, triples)
    return rows


def write_triples(path: Path, triples: list[tuple[str, str, str]] | None = None) -> Path:
    """The bundled MetaQA KB as the generic loader's head<TAB>relation<TAB>tail (gzipped)."""
    if triples is None:
        triples = sorted(load_metaqa(hops=(1,), splits=("dev",)).triples.iter_rows())
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
        f.writelines(f"{h}\t{r}\t{t}\n" for h, r, t in triples)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--triples", type=Path, help="Also write the KB here (.tsv.gz).")
    ap.add_argument("--per-template", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = write(args.questions, args.triples, per_template=args.per_template, seed=args.seed)
    with_topic = sum(r["topics"][0] in r["answers"] for r in rows)
    print(
        f"wrote {len(rows)} questions to {args.questions} ({args.questions.stat().st_size:,} "
        f"bytes; {with_topic} have their topic among their answers)"
    )


if __name__ == "__main__":
    main()
