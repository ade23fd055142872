"""A synthetic RoG-webqsp at full size: parquet in RoG's exact schema, for ingest at scale.

    python tests/data/webqsp_synth.py OUT [--scale 1.0] [--seed 0]

writes OUT/data/{train-0000k-of-00002,validation-00000-of-00001,test-00000-of-00001}.parquet
(the hub's layout; `cpr ingest webqsp --from OUT/data`) and OUT/name_mids.tsv (name<TAB>MID
for every named entity: the identity real RoG does not ship, so ingest can count names that
stand for more than one MID). `--scale 0.01` makes a small copy with the same shape.

Shape (figures marked * are from public sources, the rest are assumptions; README
"WebQSP-sized ingest" lists them with their sources):
- questions per split: 2,826 / 246 / 1,628 (*hub card of rmanluo/RoG-webqsp);
- triples per question: lognormal, median 4,400 (*graphwalk's RoG loader: "median about
  4,400"), sigma 0.7, clipped to 20..30,000;
- overlap: topics are reused across questions (power law; one distinct topic per 1.8
  questions) and 2-hop neighbourhoods are prefixes of shared per-entity blocks, so hub
  entities bring the same triples into many subgraphs. Real WebQSP shares more: its 1,628
  test subgraphs merge to 2.3M triples, 5,419 relations (*graphwalk); seed 0 here gives
  4.3M, 6,157 (a bigger graph than the real one: a harder ingest, not an easier one);
- relations: 7,200 dotted `domain.type.property` names (90 domains x 8 types x 10), a
  node's edges mostly its type's few common properties, types skewed (many persons, few
  zoos); per-question median ~335 relations (*graphwalk: 288), 6,523 in all;
- CVT (mediator) nodes named by their MID (`m.0...`, as RoG keeps them), a fifth to a third
  of a split's nodes; literals (dates, numbers) as entities, as in RoG;
- names: two pseudo-words; 3% of named entities reuse another entity's name (homonyms:
  distinct MIDs, one name), besides chance collisions.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SPLITS = {"train": (2826, 2), "validation": (246, 1), "test": (1628, 1)}  # questions, files
N_NAMED = 1_500_000  # named-entity slots, by popularity rank (0 = the biggest hub)
N_LITERAL = 200_000
CVT_BASE = 10_000_000  # CVT ids are allocated from here on; literals sit between
LIT_BASE = 5_000_000
TOPIC_POWER = 1.5  # questions per topic: most 1-2, a few popular topics many
TYPE_POWER = 8.0  # a node's (domain, type) = n_types * u**8: 56% of nodes in 1% of types
HUB_POWER = 4.0  # rank = N * u**4: P(top 1,000) = 16%, P(top 100k) = 51%
ROW_GROUP = 1000  # rows per parquet row group, like `datasets`' default writer batch

SYLLABLES = [a + b for a in "bcdfghjklmnprstvwz" for b in ("a", "e", "i", "o", "u", "ar", "en")]
DOMAINS = str.split(
    "people film music location book tv sports award education government organization "
    "business religion language medicine biology astronomy architecture military law "
    "geography food computer travel fictional_universe theater opera games visual_art "
    "royalty aviation automotive boats chemistry comic_books cvg dining distilled_spirits "
    "event fashion finance geology interests internet library measurement_unit media_common "
    "meteorology metropolitan_transit physics protected_sites radio rail soccer symbols time "
    "transportation user base common freebase type kg dataworld olympics baseball basketball "
    "american_football ice_hockey tennis cricket martial_arts celebrities influence "
    "periodicals projects spaceflight zoos wine broadcast exhibitions digicams conferences "
    "engineering film_festival base_fashion amusement_parks architecture_style bicycles "
    "skiing"
)
WORDS = str.split(
    "person place country city region parent child spouse member team position date start "
    "end award nominee winner work author genre language currency capital population area "
    "official origin release director producer actor character episode season series "
    "album track artist label instrument school degree major employer office holder term "
    "jurisdiction district party election founder headquarters product industry company "
    "subject contains containedby adjoins time_zone climate religion ethnicity sibling "
    "nationality profession height weight cause location event participant role score "
    "record venue capacity opened closed designer style material length species"
)


def _words(rng: np.random.Generator, k: int) -> list[str]:
    return [str(w) for w in rng.choice(WORDS, size=k, replace=False)]


def relation_names(rng: np.random.Generator) -> list[str]:
    """~7,000 `domain.type.property` names, 10 per (domain, type), types in blocks of 10."""
    return [
        f"{domain}.{typ}.{prop}"
        for domain in DOMAINS
        for typ in _words(rng, 8)
        for prop in _words(rng, 10)
    ]


class World:
    """Deterministic per-entity edge blocks: the shared Freebase the subgraphs are cut from."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        rng = np.random.default_rng([seed, 0])
        self.relations = relation_names(rng)
        self.n_types = len(self.relations) // 10
        self.rel_order = rng.permutation(len(self.relations))
        self.blocks: dict[int, np.ndarray] = {}
        self.next_cvt = CVT_BASE

    def popular(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Named entities by a power-law popularity: hubs come up in many subgraphs."""
        return (N_NAMED * rng.random(n) ** HUB_POWER).astype(np.int64)

    def rels(self, rng: np.random.Generator, node: int, n: int) -> np.ndarray:
        """Mostly its type's few common properties (types are skewed: many persons and
        places, few zoos), some relations from anywhere."""
        frac = (node * 0x9E3779B1 % (1 << 32)) / (1 << 32)
        own = 10 * int(self.n_types * frac**TYPE_POWER)
        local = own + np.minimum(rng.zipf(3.5, n) - 1, 9)
        anywhere = self.rel_order[np.minimum(rng.zipf(1.6, n) - 1, len(self.relations) - 1)]
        return np.where(rng.random(n) < 0.99, local, anywhere)

    def edges(self, rng: np.random.Generator, node: int, n: int, cvt_share: float) -> np.ndarray:
        """n edges at `node` as (head, relation, tail) rows; each CVT's own 2-5 facts (dates,
        roles, the other party) follow its edge, so a prefix keeps mediators whole."""
        kind = rng.random(n)
        other = self.popular(rng, n)
        other = np.where(kind > 0.95, LIT_BASE + rng.integers(0, N_LITERAL, n), other)
        is_cvt = kind < cvt_share
        cvts = np.arange(self.next_cvt, self.next_cvt + is_cvt.sum())
        self.next_cvt += len(cvts)
        other[is_cvt] = cvts
        out = rng.random(n) < 0.7  # direction: most edges leave the node
        rows = np.column_stack([np.where(out, node, other), self.rels(rng, node, n),
                                np.where(out, other, node)])  # fmt: skip
        k = rng.integers(2, 6, len(cvts))
        m = int(k.sum())
        tails = np.where(rng.random(m) < 0.2, LIT_BASE + rng.integers(0, N_LITERAL, m),
                         self.popular(rng, m))  # fmt: skip
        facts = np.column_stack([np.repeat(cvts, k), self.rels(rng, node, m), tails])
        order = np.argsort(np.concatenate([np.arange(n), np.repeat(np.flatnonzero(is_cvt), k)
                                           + 0.5]), kind="stable")  # fmt: skip
        return np.concatenate([rows, facts]).astype(np.int64)[order]

    def block(self, node: int) -> np.ndarray:
        """The node's own edges, hubs' longest; a subgraph takes a prefix of them."""
        if node not in self.blocks:
            rng = np.random.default_rng([self.seed, 2, node])
            n = int(np.clip(9000 / (node + 1) ** 0.45, 12, 9000))
            self.blocks[node] = self.edges(rng, node, n, cvt_share=0.12)
        return self.blocks[node]

    def subgraph(self, topic: int, size: int) -> np.ndarray:
        """One topic's 2-hop subgraph of about `size` triples (same topic, same graph)."""
        rng = np.random.default_rng([self.seed, 3, topic])
        star = self.edges(rng, topic, int(np.clip(size * 0.08, 3, 3000)), cvt_share=0.3)
        ends = np.unique(star[:, [0, 2]])
        named = ends[(ends < N_NAMED) & (ends != topic)]
        budget = max(size - len(star), 0)
        take = int(np.ceil(budget / max(len(named), 1) / 1.75))  # CVT facts come on top
        parts = [star] + [self.block(int(x))[: take + int(rng.integers(0, 4))] for x in named]
        return unique_rows(np.concatenate(parts))


def unique_rows(rows: np.ndarray) -> np.ndarray:
    """np.unique(rows, axis=0), fast: a row packed into one int64 (ids < 2**24)."""
    assert rows.max(initial=0) < 1 << 24, "entity ids overflow the packing"
    key = np.unique((rows[:, 0] << 37) | (rows[:, 1] << 24) | rows[:, 2])
    return np.column_stack([key >> 37, (key >> 24) & 0x1FFF, key & 0xFFFFFF])


def entity_names(ids: np.ndarray, seed: int) -> tuple[pa.Array, np.ndarray]:
    """Names and MIDs for entity ids: pseudo-word pairs for named ones (3% homonyms),
    literals as dates/numbers, CVTs named by their MID (RoG keeps those)."""
    mid = np.char.add("m.0", np.char.mod("%x", ids * 7919 % (1 << 36) + (1 << 32)))
    h = (ids * 0x9E3779B1 + seed) % (1 << 61)
    homonym = (h % 100) < 3
    base = ids // 7 * 7  # a homonym takes the name of the first id of its group of 7
    h = np.where(homonym & (base != ids), (base * 0x9E3779B1 + seed) % (1 << 61), h)
    s = np.array(SYLLABLES)
    n = len(s)
    first = np.char.add(s[h % n], s[(h // n) % n])
    last = np.char.add(np.char.add(s[(h // n**2) % n], s[(h // n**3) % n]), s[(h // n**4) % n])
    named = np.char.add(np.char.add(np.char.capitalize(first), " "), np.char.capitalize(last))
    lit = ids - LIT_BASE
    date = np.char.mod("%04d-", 1700 + lit % 320)
    date = np.char.add(date, np.char.mod("%02d-", 1 + lit // 320 % 12))
    date = np.char.add(date, np.char.mod("%02d", 1 + lit // 3840 % 28))
    literal = np.where(lit % 3 == 0, np.char.mod("%d", lit), date)
    names = np.where(ids < N_NAMED, named, np.where(ids < CVT_BASE, literal, mid))
    return pa.array(names.tolist(), pa.string()), mid


def questions(world: World, total: int, rng: np.random.Generator, median: int) -> list[dict]:
    """Topics (Zipf reuse, 10% with two), a size per topic, answers near the topic."""
    n_topics = max(total * 10 // 18, 1)
    topic_pool = rng.permutation(np.arange(50, 50 + 4 * n_topics))[:n_topics]
    sizes = np.clip(rng.lognormal(np.log(median), 0.7, n_topics), 20, 30_000).astype(int)
    picks = (n_topics * rng.random(total) ** TOPIC_POWER).astype(np.int64)
    out = []
    for i in range(total):
        k = [int(picks[i])]
        if rng.random() < 0.1:
            k.append(int(rng.integers(0, n_topics)))
        graph = unique_rows(
            np.concatenate([world.subgraph(int(topic_pool[j]), int(sizes[j])) for j in k])
        )
        near = graph[np.isin(graph[:, 0], topic_pool[k]), 2]
        near = near[near < CVT_BASE] if (near < CVT_BASE).any() else graph[:, 2]
        n_ans = int(rng.choice([1, 2, 3, 6, 12], p=[0.51, 0.17, 0.11, 0.09, 0.12]))
        answers = rng.choice(near, size=min(n_ans, len(near)), replace=False)
        if rng.random() < 0.03:  # a few answers outside the subgraph, as in RoG
            answers = rng.integers(N_NAMED // 2, N_NAMED, 1)
        rel = world.relations[int(graph[rng.integers(0, len(graph)), 1])]
        out.append({"topics": topic_pool[k], "answers": answers, "graph": graph, "rel": rel})
    return out


def write_split(rows: list[dict], ids: list[str], names: pa.Array, index: dict, path: Path):
    """One parquet file in RoG's schema; graph strings are gathered from one name table."""

    def lists(col: str) -> pa.Array:
        lens = [len(r[col]) for r in rows]
        flat = np.concatenate([r[col] for r in rows]) if rows else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), pc.take(names, pa.array(index(flat))))

    graphs = [r["graph"] for r in rows]
    flat = np.concatenate(graphs)
    cells = np.column_stack([index(flat[:, 0]), flat[:, 1] + index.rel0, index(flat[:, 2])])
    triple = pa.ListArray.from_arrays(
        pa.array(np.arange(0, 3 * len(flat) + 1, 3, dtype=np.int32)),
        pc.take(names, pa.array(cells.ravel())),
    )
    outer = np.concatenate([[0], np.cumsum([len(g) for g in graphs])]).astype(np.int32)
    text = [f"what is the {r['rel'].split('.')[-1].replace('_', ' ')} of {{t}}" for r in rows]
    topics = lists("topics")
    table = pa.table(
        {
            "id": ids,
            "question": [
                t.format(t=str(q[0])) for t, q in zip(text, topics.to_pylist(), strict=True)
            ],
            "answer": lists("answers"),
            "q_entity": topics,
            "a_entity": lists("answers"),
            "graph": pa.ListArray.from_arrays(pa.array(outer), triple),
            "choices": pa.array([[] for _ in rows], pa.list_(pa.null())),
        }
    )
    pq.write_table(table, path, row_group_size=ROW_GROUP)
    return table.num_rows, len(flat)


class NameIndex:
    """Entity id -> row of the name table (entities first, then relations at rel0)."""

    def __init__(self, ids: np.ndarray, n_relations: int) -> None:
        self.ids = ids
        self.rel0 = len(ids)
        self.n_relations = n_relations

    def __call__(self, values: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.ids, values)


def generate(out: Path, scale: float = 1.0, seed: int = 0, median: int = 4400) -> dict:
    """Write the dataset under `out`; returns the counts it wrote. median: triples per
    question (a test wants few)."""
    began = time.monotonic()
    world = World(seed)
    rng = np.random.default_rng([seed, 4])
    counts = {s: max(int(round(n * scale)), 1) for s, (n, _) in SPLITS.items()}
    made = questions(world, sum(counts.values()), rng, median)
    ids = np.unique(
        np.concatenate(
            [
                np.concatenate([r["graph"][:, [0, 2]].ravel(), r["topics"], r["answers"]])
                for r in made
            ]
        )  # fmt: skip
    )
    names, mids = entity_names(ids, seed)
    table = pa.concat_arrays([names, pa.array(world.relations, pa.string())])
    index = NameIndex(ids, len(world.relations))
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    stats: dict = {"files": [], "triple_rows": 0}
    start = 0
    for split, (_, files) in SPLITS.items():
        rows = made[start : start + counts[split]]
        prefix = "WebQTest" if split == "test" else "WebQTrn"
        qids = [f"{prefix}-{start + i}" for i in range(len(rows))]
        start += counts[split]
        for f, part in enumerate(np.array_split(np.arange(len(rows)), files)):
            path = data / f"{split}-{f:05d}-of-{files:05d}.parquet"
            n, t = write_split([rows[i] for i in part], [qids[i] for i in part], table, index, path)
            stats["files"].append((path.name, n, t))
            stats["triple_rows"] += t
    named = ids < N_NAMED
    (out / "name_mids.tsv").write_text(
        "".join(
            f"{n}\t{m}\n"
            for n, m in zip(names.filter(pa.array(named)).to_pylist(), mids[named], strict=True)
        )  # fmt: skip
    )
    stats["seconds"] = round(time.monotonic() - began, 1)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each split")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--median", type=int, default=4400, help="triples per question")
    args = parser.parse_args()
    stats = generate(args.out, args.scale, args.seed, args.median)
    for name, n, t in stats["files"]:
        print(f"{name}: {n:,} questions, {t:,} triple rows")
    print(f"{stats['triple_rows']:,} triple rows in {stats['seconds']} s -> {args.out}")


if __name__ == "__main__":
    main()
