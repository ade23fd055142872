"""How much of the bundled MetaQA KB only the 1-hop TEST answers vouch for, and what a
"clean" KB without those triples would do to 1-hop recall (data/metaqa/README.md).

    python experiments/metaqa_clean_kb.py

The bundled KB is the union of keallm's KB splits, one of which (test.tsv) is exactly the
1-hop test answer triples, so every 1-hop test question has its answer one hop away while
~2% of 1-hop dev questions do not. keallm's split files are not here, so which triples
ONLY test.tsv holds cannot be read off; this measures, from the bundled files alone (the
qa_*_qtype files name each question's relations, e.g. movie_to_director = directed_by):
- T1: KB triples that are (topic, relation, answer) triples of 1-hop test questions;
- how many of them other question files evidence: as 1-hop dev answer triples (D1), or on
  a gold walk (the question type's relation sequence from the topic to a gold answer,
  never back through the topic) of a 2- or 3-hop dev or test question (G23);
- the same for dev (D1 against T1 and G23), the mirror image: how often a triple that
  the dev answers need is missing from the KB, and how often other files vouch for one;
- "reachable": share of 1-hop questions with a gold answer one hop from the topic (any
  relation), under the KB as bundled and under candidate clean KBs, for test AND dev.
No Neo4j, no model: files in, numbers out.
"""

from __future__ import annotations

import gzip
import random
from collections import defaultdict
from pathlib import Path

from cpr_neo4j.loaders.metaqa_matched import RELATION

ROOT = Path(__file__).resolve().parents[1] / "data" / "metaqa"
Triple = tuple[str, str, str]


def _lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def kb() -> set[Triple]:
    rows = (line.split("|") for line in _lines(ROOT / "kb_partial_reconstructed.txt.gz"))
    return {(h, r, t) for h, r, t in rows}


def steps(qtype: str) -> list[tuple[str, bool]]:
    """movie_to_actor_to_movie -> [(starred_actors, forward), (starred_actors, reverse)]."""
    kinds = qtype.split("_to_")
    out = []
    for a, b in zip(kinds, kinds[1:], strict=False):
        out.append((RELATION[b], True) if a == "movie" else (RELATION[a], False))
    return out


def questions(hops: int, split: str) -> list[tuple[str, list[tuple[str, bool]], set[str]]]:
    """(topic, steps, gold answers) per question, in file order."""
    qa = _lines(ROOT / f"{hops}-hop" / f"{split}.txt.gz")
    types = _lines(ROOT / f"{hops}-hop" / f"qa_{split}_qtype.txt.gz")
    assert len(qa) == len(types), (hops, split)
    out = []
    for line, qtype in zip(qa, types, strict=True):
        text, answers = line.split("\t")
        topic = text[text.index("[") + 1 : text.index("]")].strip()
        out.append((topic, steps(qtype), {a for a in answers.split("|") if a}))
    return out


def answer_triples(topic: str, step: tuple[str, bool], answers: set[str]) -> set[Triple]:
    rel, forward = step
    return {(topic, rel, a) if forward else (a, rel, topic) for a in answers}


def gold_walk_triples(adj, topic: str, path, answers: set[str]) -> set[Triple]:
    """Triples on walks topic -path-> gold answer that never pass through the topic again."""
    layers = [{topic}]
    edges = []
    for rel, fwd in path:
        hop = [(u, v) for u in layers[-1] for v in adj[rel, fwd].get(u, ()) if v != topic]
        edges.append((rel, fwd, hop))
        layers.append({v for _, v in hop})
    keep = answers
    out: set[Triple] = set()
    for rel, fwd, hop in reversed(edges):
        used = [(u, v) for u, v in hop if v in keep]
        out |= {(u, rel, v) if fwd else (v, rel, u) for u, v in used}
        keep = {u for u, _ in used}
    return out


def reach(kb_set: set[Triple], qs) -> float:
    """Share of questions with a gold answer one hop from the topic, by any relation."""
    nbrs: dict[str, set[str]] = defaultdict(set)
    for h, _, t in kb_set:
        nbrs[h].add(t)
        nbrs[t].add(h)
    return sum(bool(nbrs.get(t, set()) & a) for t, _, a in qs) / len(qs)


def main() -> None:
    full = kb()
    adj: dict[tuple[str, bool], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for h, r, t in full:
        adj[r, True][h].add(t)
        adj[r, False][t].add(h)
    one = {s: questions(1, s) for s in ("dev", "test")}
    ans = {s: set().union(*(answer_triples(t, p[0], a) for t, p, a in one[s])) for s in one}
    g23 = set()
    for hops in (2, 3):
        for split in ("dev", "test"):
            for t, p, a in questions(hops, split):
                g23 |= gold_walk_triples(adj, t, p, a)
    t1, d1 = ans["test"] & full, ans["dev"] & full
    print(f"KB triples: {len(full):,}")
    print(f"1-hop answer triples needed: test {len(ans['test']):,}, dev {len(ans['dev']):,}")
    print(
        f"  in the KB: test {len(t1):,} ({len(t1) / len(ans['test']):.2%}), "
        f"dev {len(d1):,} ({len(d1) / len(ans['dev']):.2%})"
    )
    dev_only = ans["dev"] - ans["test"]
    rate = 1 - len(dev_only & full) / len(dev_only)  # measured on dev, never on test
    print(
        f"  dev answer triples that are not test answer triples: {len(dev_only):,}, in the KB "
        f"{len(dev_only & full) / len(dev_only):.2%} (the presence rate without test.tsv's help)"
    )
    print(f"triples on 2/3-hop dev/test gold walks (G23): {len(g23):,}")
    for name, own, other in (("T1 (test)", t1, d1), ("D1 (dev)", d1, t1)):
        print(
            f"{name}: {len(own):,}; also 1-hop answers of the other split {len(own & other):,}; "
            f"on G23 {len(own & g23):,}; either {len(own & (other | g23)):,}; "
            f"neither {len(own - other - g23):,}"
        )
    candidates = {
        "as bundled": full,
        "A: drop T1 not in D1 or G23": full - (t1 - d1 - g23),
        "A': drop T1 not in D1": full - (t1 - d1),
        "mirror of A on dev: drop D1 not in T1 or G23": full - (d1 - t1 - g23),
    }
    # A simulation, not a cleaning: if keallm's other splits lose triples at random (the
    # per-type missing rates on dev are flat), the triples only test.tsv holds are a random
    # share `rate` of T1 - D1; dropping such a seeded share matches dev in expectation.
    for seed in range(3):
        rng = random.Random(seed)
        drop = {x for x in sorted(t1 - d1) if rng.random() < rate}
        candidates[f"R{seed}: drop a random {rate:.2%} of T1 not in D1 (seed {seed})"] = full - drop
    print("| KB | triples | 1-hop test reachable | 1-hop dev reachable |")
    print("|---|---:|---:|---:|")
    for name, kb_set in candidates.items():
        print(
            f"| {name} | {len(kb_set):,} | {reach(kb_set, one['test']):.4f} | "
            f"{reach(kb_set, one['dev']):.4f} |"
        )


if __name__ == "__main__":
    main()
