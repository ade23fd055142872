"""A small graph whose 2-hop questions are too few for a threshold of their own.

    python bench/fallback_toy.py DIR
    cpr ingest fbtoy --triples DIR/t.tsv --entities DIR/e.tsv --questions DIR/q.jsonl
    cpr train fbtoy --cal-share 0.3 --epochs 3 --rollouts 8 && cpr calibrate fbtoy
    cpr ask "who directed the movies starred by [Noxbelhin Wixtor]" --dataset fbtoy

500 movies, each with a director, two actors and a year; 460 one-hop questions ("who
directed [M]") and 40 two-hop ones ("who directed the movies starred by [A]"), 430 of them
in the training split. With a 30% calibration share the 2-hop group has ~10 calibration
questions and no other small group: `cpr ask` gives it the all-questions threshold.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SYL = [
    "ka",
    "lo",
    "mi",
    "ra",
    "ven",
    "tor",
    "sil",
    "dan",
    "quo",
    "bel",
    "zur",
    "fen",
    "gal",
    "hin",
    "jor",
    "pel",
    "wix",
    "yar",
    "nox",
    "cal",
]


def main(out: Path) -> None:
    r = random.Random(35)
    used: set[str] = set()

    def name() -> str:
        while True:
            n = "".join(r.choice(SYL) for _ in range(3)).capitalize() + " "
            n += "".join(r.choice(SYL) for _ in range(2)).capitalize()
            if n not in used:
                used.add(n)
                return n

    movies = [f"m{i}" for i in range(500)]
    dirs, acts = [f"d{i}" for i in range(120)], [f"a{i}" for i in range(250)]
    names = {e: name() for e in movies + dirs + acts}
    names |= {f"y{y}": str(y) for y in range(1990, 2021)}
    tri, directed, stars = [], {}, {}
    for m in movies:
        directed[m] = r.choice(dirs)
        tri.append((m, "directed_by", directed[m]))
        for a in r.sample(acts, 2):
            tri.append((m, "starred_actors", a))
            stars.setdefault(a, []).append(m)
        tri.append((m, "release_year", f"y{r.randint(1990, 2020)}"))
    qs = []
    for i, m in enumerate(r.sample(movies, 460)):
        qs.append(
            {
                "id": f"q1_{i}",
                "question": f"who directed [{names[m]}]",
                "topics": [m],
                "answers": [directed[m]],
                "split": "train" if i < 400 else "test",
                "hops": 1,
            }
        )
    two = [a for a in acts if a in stars]
    r.shuffle(two)
    for i, a in enumerate(two[:40]):
        ans = sorted({directed[m] for m in stars[a]})
        qs.append(
            {
                "id": f"q2_{i}",
                "question": f"who directed the movies starred by [{names[a]}]",
                "topics": [a],
                "answers": ans,
                "split": "train" if i < 30 else "test",
                "hops": 2,
            }
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "t.tsv").write_text("".join(f"{h}\t{rel}\t{t}\n" for h, rel, t in tri))
    (out / "e.tsv").write_text("".join(f"{e}\t{n}\n" for e, n in names.items()))
    (out / "q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
