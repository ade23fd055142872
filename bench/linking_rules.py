"""The linker's rules and thresholds re-checked on questions outside every calibration share,
on three kinds of dataset at once: each setting changed alone from what ships, linking
counted as bench/linking_neo4j.py counts it (the in-memory index of the server's rows: the
stored index links identically, as that bench and tests/test_entity_index.py check).

    python bench/linking_rules.py [--datasets webqsp-names,metaqa-plain,royals]

Questions: a dataset's training split without the share `cpr train --cal-share S` holds out
for calibration (S: 0.3 for webqsp-names as `make results` trains it, else the default
0.1; stages/train.py carves it with questions.split_off and seed 0), plus its dev split;
never the test split. metaqa-plain: 2,000 dev questions (seeded), brackets removed (its
training split is larger than needed, and dev holds no calibration share)."""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from linking_neo4j import outcome  # noqa: E402

from cpr_neo4j.config import Neo4jSettings  # noqa: E402
from cpr_neo4j.graph import entity_index, records  # noqa: E402
from cpr_neo4j.graph.store import GraphStore  # noqa: E402
from cpr_neo4j.linking import name_rules, resolve  # noqa: E402
from cpr_neo4j.training import questions as qsel  # noqa: E402

CAL_SHARE = {"webqsp-names": 0.3}


def outside_calibration(store, dataset: str) -> list[tuple[str, list[str]]]:
    if dataset == "metaqa-plain":
        dev = records.questions(store, dataset, "dev")
        return [(q.text, q.topics) for q in random.Random(7).sample(dev, 2000)]
    split = qsel.training_split(store, dataset)
    pool = qsel.load(store, dataset, split, None)
    _, cal = qsel.split_off(pool, CAL_SHARE.get(dataset, 0.1), 0)
    held = {q.id for q in cal}
    rows = [q for q in records.questions(store, dataset, split) if q.id not in held]
    rows += records.questions(store, dataset, "dev")
    return [(q.text, q.topics) for q in rows]


def memory_index(store, dataset: str) -> entity_index.EntityIndex:
    row = store.read("entity_names_page", dataset=dataset, after="", page=10**7)[0]
    relations = records.relation_text(store, dataset)
    return entity_index.EntityIndex(row["ids"], row["names"], row["degrees"], relations)


# (label, {module attribute: value}) each changed alone; "rare" rebuilds the index
VARIANTS = [
    ("shipped (names-v4)", {}),
    ("partial share 0.2 (ships 0.3)", {(name_rules, "MIN_PARTIAL"): 0.2}),
    ("partial share 0.4", {(name_rules, "MIN_PARTIAL"): 0.4}),
    ("rare word: in <= 20 names (ships 50)", {(entity_index, "RARE"): 20}),
    ("rare word: in <= 100 names", {(entity_index, "RARE"): 100}),
    ("no acronyms", {(resolve, "acronyms"): lambda *a, **k: []}),
    ("acronyms beside whole names (v3)", {(resolve, "ACRONYMS_WITH_WHOLE"): True}),
    ("family and everyday words as initials (v3)", {(name_rules, "NOT_INITIALS"): frozenset()}),
    (
        "both of the two above (names-v3's rules)",
        {(resolve, "ACRONYMS_WITH_WHOLE"): True, (name_rules, "NOT_INITIALS"): frozenset()},
    ),
    ("one-case initials of 2 letters (ships 3)", {(name_rules, "ONE_CASE_LETTERS"): 2}),
    ("one-case initials of 4 letters", {(name_rules, "ONE_CASE_LETTERS"): 4}),
    ("ties searched: 2 (ships 4)", {(resolve, "MAX_TIED"): 2}),
    ("ties searched: 8", {(resolve, "MAX_TIED"): 8}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="webqsp-names,metaqa-plain,royals")
    a = ap.parse_args()
    with GraphStore(Neo4jSettings.load()) as store:
        for ds in a.datasets.split(","):
            qs = outside_calibration(store, ds)
            print(f"\n{ds}: {len(qs)} questions outside every calibration share and test")
            for label, changes in VARIANTS:
                saved = {k: getattr(*k) for k in changes}
                for (mod, attr), v in changes.items():
                    setattr(mod, attr, v)
                try:
                    idx = memory_index(store, ds)
                    c = Counter(
                        outcome(lambda: resolve.resolve(store, ds, t, index=idx), set(g))[0]  # noqa: B023
                        for t, g in qs
                    )
                finally:
                    for (mod, attr), v in saved.items():
                        setattr(mod, attr, v)
                tied = c["tied, gold among them"]
                refused = sum(v for k, v in c.items() if k.startswith("refused"))
                print(
                    f"  {label:45s} correct {c['correct']:5d}  tied with gold {tied:4d}  "
                    f"tied without {c['tied, gold not among them']:3d}  wrong {c['wrong']:4d}  "
                    f"refused {refused:3d}"
                )


if __name__ == "__main__":
    main()
