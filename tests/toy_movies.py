"""A small movie graph with readable names and no questions (a new user's graph), and plain
questions about it with their answers by name, for the generated-questions and labelling
tests. Deterministic: everything derives from the fixed lists below."""

from __future__ import annotations

from pathlib import Path

DIRECTORS = [
    "Ana Lindqvist", "Bruno Okafor", "Carla Menendez", "Dmitri Vasko",
    "Elena Fairweather", "Farid Haddad", "Greta Solberg", "Hugo Brannigan",
]  # fmt: skip
ACTORS = [
    "Iris Calloway", "Jonas Pettersen", "Kofi Mensah", "Lena Varga", "Marco Bellini",
    "Nadia Petrova", "Oscar Lindgren", "Priya Raman", "Quentin Ashby", "Rosa Delgado",
    "Samir Nasser", "Tilda Moreau", "Umar Siddiqui", "Vera Novak", "Walter Quist",
]  # fmt: skip
TITLES = [
    "Harbor of Glass", "The Silent Orchard", "Copper Skies", "Midnight Ferry",
    "A Winter Ledger", "The Paper Lantern", "Salt and Thunder", "Northbound Echo",
    "The Velvet Quarry", "Distant Lighthouse", "Iron Meadow", "The Last Cartographer",
    "Hollow Crown Road", "Saffron Tide", "The Quiet Engine", "Marble Orchard Blues",
    "Crimson Atlas", "The Amber Signal", "Glass Tiger Summer", "Lantern Street",
    "The Borrowed Moon", "Winter Falcon", "Ember Valley", "The Tin Astronomer",
]  # fmt: skip
GENRES = ["Drama", "Comedy", "Thriller", "Western"]


def _id(name: str) -> str:
    return name.lower().replace(" ", "_")


def triples() -> list[tuple[str, str, str]]:
    rows = []
    for i, title in enumerate(TITLES):
        m = _id(title)
        rows.append((m, "directed_by", _id(DIRECTORS[i % len(DIRECTORS)])))
        for k in (0, 5):
            rows.append((m, "starred_actors", _id(ACTORS[(i + k) % len(ACTORS)])))
        rows.append((m, "release_year", str(1990 + i % 9)))
        rows.append((m, "has_genre", _id(GENRES[i % len(GENRES)])))
    return rows


def names() -> dict[str, str]:
    out = {_id(n): n for n in DIRECTORS + ACTORS + TITLES + GENRES}
    out.update({str(1990 + y): str(1990 + y) for y in range(9)})
    return out


def write(folder: Path) -> tuple[Path, Path]:
    """triples.tsv and entities.tsv in `folder`."""
    t, e = folder / "triples.tsv", folder / "entities.tsv"
    t.write_text("".join(f"{h}\t{r}\t{x}\n" for h, r, x in triples()))
    e.write_text("".join(f"{i}\t{n}\n" for i, n in names().items()))
    return t, e


def questions() -> list[tuple[str, set[str]]]:
    """30 plain questions (1 and 2 hops) with their answers' names, read off the triples."""
    rows = triples()
    nm = names()
    directed = {h: x for h, r, x in rows if r == "directed_by"}
    starred: dict[str, set[str]] = {}
    for h, r, x in rows:
        if r == "starred_actors":
            starred.setdefault(h, set()).add(x)
    year = {h: x for h, r, x in rows if r == "release_year"}
    out: list[tuple[str, set[str]]] = []
    for d in DIRECTORS[:6]:
        movies = {m for m, x in directed.items() if x == _id(d)}
        out.append((f"which movies did {d} direct", {nm[m] for m in movies}))
    for t in TITLES[:8]:
        out.append((f"who directed {t}", {nm[directed[_id(t)]]}))
    for t in TITLES[8:14]:
        out.append((f"which actors starred in {t}", {nm[a] for a in starred[_id(t)]}))
    for t in TITLES[14:20]:
        out.append((f"what year was {t} released", {nm[year[_id(t)]]}))
    for d in DIRECTORS[6:8]:
        movies = {m for m, x in directed.items() if x == _id(d)}
        actors = {nm[a] for m in movies for a in starred[m]}
        out.append((f"who starred in the movies directed by {d}", actors))
    for a in ACTORS[:2]:
        movies = {m for m, s in starred.items() if _id(a) in s}
        out.append((f"who directed the films starring {a}", {nm[directed[m]] for m in movies}))
    return out


def labelled_rows() -> list[dict]:
    """100 labelled questions (questions.jsonl rows, entity ids) read off the triples."""
    rows = triples()
    out: list[dict] = []
    for rel, words in (
        ("directed_by", "who directed {}"),
        ("starred_actors", "who starred in {}"),
        ("release_year", "when was {} released"),
        ("has_genre", "what genre is {}"),
    ):
        for t in TITLES:
            m = _id(t)
            answers = sorted({x for h, r, x in rows if h == m and r == rel})
            out.append({"question": words.format(t), "topics": [m], "answers": answers})
    for d in DIRECTORS:
        movies = sorted({h for h, r, x in rows if r == "directed_by" and x == _id(d)})
        out.append({"question": f"which movies did {d} direct", "topics": [_id(d)],
                    "answers": movies})  # fmt: skip
    out = out[:100]
    return [{"id": f"toy{i:03d}", "split": "train", "hops": 1, **r} for i, r in enumerate(out)]
