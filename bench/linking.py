"""Entity linking from question text, measured offline on the dataset files (no Neo4j).

    python bench/linking.py metaqa [--sample 600] [--old]
    python bench/linking.py webqsp-names [--split train,dev] [--old]

Builds the in-memory form of the linker's index (names, degrees from the triples) from the
loader's rows (`cpr ask` reads the same index from Neo4j: bench/linking_neo4j.py compares
the two) and links every question with `cpr ask`'s rules, without the search that breaks
the ties the names leave (linking/readings.py): a tie counts as "tied" with the gold topic
among the candidates or not. MetaQA: bracketed and plain (brackets removed) text, the
issue's sample (`random.seed(0); random.sample(test rows, 600)`). webqsp-names: the gold
topic, another entity from which a gold answer is reachable within --hops (undirected),
wrong, refused.
--old: the linker of commit 5e0108f, from a copy at /tmp/oldlink (see --help)."""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import sys
from collections import Counter
from pathlib import Path

from cpr_neo4j.errors import CprError
from cpr_neo4j.linking import resolve

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.linking_index import index_of  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def split_of(qid: str, shares=(0.7, 0.1, 0.2)) -> str:
    """As `cpr ingest --hash-split 70,10,20` (loaders/registry.py hash_split)."""
    u = int.from_bytes(hashlib.sha256(qid.encode()).digest()[:8], "big") / 2**64
    return "train" if u < shares[0] else "dev" if u < shares[0] + shares[1] else "test"


def within(adj, start: str, hops: int) -> set[str]:
    seen, frontier = {start}, {start}
    for _ in range(hops):
        frontier = {n for e in frontier for n in adj.get(e, ())} - seen
        seen |= frontier
    return seen


def outcome(index, text, gold: set[str], old: bool) -> tuple[str, list[list[str]]]:
    try:
        if old:
            from oldlink import linking as oldl  # the 5e0108f linker (see --help)

            fake = type("S", (), {})()
            oldl.entity_index.get = lambda *a, **k: index  # noqa: ARG005
            topics, _ = oldl.link(fake, "d", text)
            choices = [[t["id"] for t in topics]]
        else:
            found = resolve.resolve(None, "d", text, index=index)
            choices = [[t["id"] for t in c.topics] for c in found.choices]
    except CprError as exc:  # the kind of refusal, without the names it quotes
        return "refused: " + re.sub(r"'[^']*'|\"[^\"]*\"", "NAME", str(exc).split(":")[0]), []
    if len(choices) == 1:
        return ("correct" if set(choices[0]) == gold else "wrong"), choices
    hit = any(set(c) == gold for c in choices)
    return ("tied, gold among them" if hit else "tied, gold not among them"), choices


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", choices=["metaqa", "webqsp-names"])
    ap.add_argument("--sample", type=int, default=600)
    ap.add_argument("--split", default="train,dev", help="webqsp-names splits (hash 70/10/20)")
    ap.add_argument("--hops", type=int, default=2)
    ap.add_argument("--metaqa-split", default="test", choices=["dev", "test"])
    ap.add_argument("--old", action="store_true", help="needs /tmp/oldlink/oldlink/*.py")
    ap.add_argument("--show", type=int, default=0, help="print N failures")
    a = ap.parse_args()
    if a.old:
        sys.path.insert(0, "/tmp/oldlink")
    if a.dataset == "metaqa":
        from cpr_neo4j.loaders.metaqa import load_metaqa

        ds = load_metaqa(splits=(a.metaqa_split,))
        index, _ = index_of(ds)
        rows = ds.questions.select("text", "topics").rows()
        random.seed(0)
        rows = random.sample(rows, a.sample) if a.sample else rows
        for form in ("bracketed", "plain"):
            counts, bad = Counter(), []
            for text, topics in rows:
                t = text if form == "bracketed" else text.replace("[", "").replace("]", "")
                o, ch = outcome(index, t, set(topics), a.old)
                counts[o] += 1
                if o != "correct":
                    bad.append((t, topics, o, ch[:3]))
            got = dict(counts.most_common())
            print(f"metaqa {a.metaqa_split}, {len(rows)} questions, {form}: {got}")
            for b in bad[: a.show]:
                print("   ", b)
        return
    from cpr_neo4j.loaders.triples import load_triples

    root = SHARED / "webqsp_names"
    ds = load_triples("webqsp-names", root / "triples.tsv", questions=root / "questions.jsonl")
    index, adj = index_of(ds)
    wanted = set(a.split.split(","))
    counts, bad, n, ceiling, reached = Counter(), [], 0, 0, 0
    for qid, text, topics, answers in ds.questions.select("id", "text", "topics", "answers").rows():
        if split_of(qid) not in wanted:
            continue
        n += 1
        ceiling += any(set(answers) & within(adj, t, a.hops) for t in topics)
        o, ch = outcome(index, text, set(topics), a.old)
        reaches = [any(set(answers) & within(adj, e, a.hops) for e in c) for c in ch]
        reached += bool(reaches) and all(reaches)  # a tie counts only if every reading reaches
        if o not in ("correct",) and ch:
            reach = [c for c in ch if any(set(answers) & within(adj, e, a.hops) for e in c)]
            if o == "wrong" and reach:
                o = "another entity, answer reachable"
            elif o.startswith("tied") and len(reach) == len(ch):
                o = "tied, answer reachable from every one"
        counts[o] += 1
        if o not in ("correct", "another entity, answer reachable"):
            bad.append((text, topics, o, ch[:3]))
    print(f"webqsp-names {a.split} ({n} questions): {dict(counts.most_common())}")
    print(f"  the gold topic itself reaches a gold answer within {a.hops} hops: {ceiling}")
    print(f"  the linked entity (every reading of a tie) reaches one: {reached}")
    for b in bad[: a.show]:
        print("   ", b)


if __name__ == "__main__":
    main()
