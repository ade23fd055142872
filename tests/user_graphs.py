"""Property graphs as a Neo4j user has them (their own labels, name properties and
relationship types), written into the test server for `cpr ingest NAME --from-neo4j`.

Each graph carries a marker label of its own (`graph`), so a test writes, counts and
removes exactly its graph and nothing of cpr's or of another test's.
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A small royal family: (:Person {name})-[:FATHER|MOTHER|SPOUSE|BORN_IN]->(...), places as
# (:Place {placeName}) (a name property of another name: --name-property Place=placeName)
FATHER = {
    "Charles": "Philip", "Anne": "Philip", "Andrew": "Philip", "Edward": "Philip",
    "William": "Charles", "Harry": "Charles", "George": "William", "Charlotte": "William",
    "Louis": "William", "Archie": "Harry", "Lilibet": "Harry", "Peter Phillips": "Mark Phillips",
    "Zara Tindall": "Mark Phillips", "Beatrice": "Andrew", "Eugenie": "Andrew",
    "Louise": "Edward", "James": "Edward", "Elizabeth II": "George VI",
    "Margaret": "George VI",
}  # fmt: skip
MOTHER = {
    "Charles": "Elizabeth II", "Anne": "Elizabeth II", "Andrew": "Elizabeth II",
    "Edward": "Elizabeth II", "William": "Diana", "Harry": "Diana", "George": "Catherine",
    "Charlotte": "Catherine", "Louis": "Catherine", "Archie": "Meghan", "Lilibet": "Meghan",
    "Peter Phillips": "Anne", "Zara Tindall": "Anne", "Beatrice": "Sarah Ferguson",
    "Eugenie": "Sarah Ferguson", "Louise": "Sophie", "James": "Sophie",
    "Elizabeth II": "Elizabeth Bowes-Lyon", "Margaret": "Elizabeth Bowes-Lyon",
}  # fmt: skip
SPOUSE = [
    ("Elizabeth II", "Philip"), ("Charles", "Camilla"), ("William", "Catherine"),
    ("Harry", "Meghan"), ("Anne", "Mark Phillips"), ("Andrew", "Sarah Ferguson"),
    ("Edward", "Sophie"), ("George VI", "Elizabeth Bowes-Lyon"),
]  # fmt: skip
BORN_IN = {
    "Elizabeth II": "Mayfair", "Charles": "Buckingham Palace", "Anne": "Clarence House",
    "Andrew": "Buckingham Palace", "Edward": "Buckingham Palace", "William": "Paddington",
    "Harry": "Paddington", "George": "Paddington", "Charlotte": "Paddington",
    "Louis": "Paddington", "Archie": "Marylebone", "Lilibet": "Santa Barbara",
    "Philip": "Corfu", "Diana": "Sandringham", "Margaret": "Glamis Castle",
    "Meghan": "Los Angeles", "Catherine": "Reading",
}  # fmt: skip


def family_rows() -> dict[str, list[dict]]:
    """Relationship type -> [{head, tail}] of the family graph."""
    rows: dict[str, list[dict]] = defaultdict(list)
    for child, parent in FATHER.items():
        rows["FATHER"].append({"head": child, "tail": parent})
    for child, parent in MOTHER.items():
        rows["MOTHER"].append({"head": child, "tail": parent})
    for a, b in SPOUSE:
        rows["SPOUSE"] += [{"head": a, "tail": b}, {"head": b, "tail": a}]
    for person, place in BORN_IN.items():
        rows["BORN_IN"].append({"head": person, "tail": place})
    return dict(rows)


# statements per relationship type: the types are this file's constants, never data
_PERSON_REL = (
    "UNWIND $rows AS row "
    "MERGE (h:Person:{graph} {{name: row.head}}) MERGE (t:Person:{graph} {{name: row.tail}}) "
    "MERGE (h)-[:{rel}]->(t)"
)
_PLACE_REL = (
    "UNWIND $rows AS row "
    "MERGE (h:Person:{graph} {{name: row.head}}) MERGE (t:Place:{graph} {{placeName: row.tail}}) "
    "MERGE (h)-[:{rel}]->(t)"
)


def write_family(store, graph: str = "UserFamily") -> None:
    for rel, rows in family_rows().items():
        text = (_PLACE_REL if rel == "BORN_IN" else _PERSON_REL).format(graph=graph, rel=rel)
        store.query(text, {"rows": rows}, write=True)


# MetaQA's KB as a property graph: movies by title, people by name, the rest by value
METAQA_TAILS = {
    "directed_by": ("DIRECTED_BY", "Person", "name"),
    "written_by": ("WRITTEN_BY", "Person", "name"),
    "starred_actors": ("STARRED_ACTORS", "Person", "name"),
    "has_genre": ("HAS_GENRE", "Genre", "name"),
    "has_tags": ("HAS_TAGS", "Tag", "name"),
    "in_language": ("IN_LANGUAGE", "Language", "name"),
    "release_year": ("RELEASE_YEAR", "Year", "value"),
    "has_imdb_rating": ("HAS_IMDB_RATING", "Rating", "value"),
    "has_imdb_votes": ("HAS_IMDB_VOTES", "Votes", "value"),
}


def metaqa_kb_rows(limit_movies: int | None = None) -> dict[str, list[dict]]:
    """relation -> [{head, tail}] from the bundled MetaQA KB (data/metaqa); the first
    `limit_movies` movies only when given."""
    path = ROOT / "data" / "metaqa" / "kb_partial_reconstructed.txt.gz"
    rows: dict[str, list[dict]] = defaultdict(list)
    movies: dict[str, None] = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            parts = line.rstrip("\n").split("|")
            if len(parts) != 3 or parts[1] not in METAQA_TAILS:
                continue
            head, rel, tail = parts
            if limit_movies is not None and head not in movies and len(movies) >= limit_movies:
                continue
            movies[head] = None
            rows[rel].append({"head": head, "tail": tail})
    return dict(rows)


def write_metaqa(store, graph: str = "UserMovies", limit_movies: int | None = None) -> int:
    """(:Movie {title})-[:DIRECTED_BY]->(:Person {name}) etc.; returns relationships sent."""
    for label, prop in {("Movie", "title"), ("Person", "name"), ("Genre", "name"),
                        ("Tag", "name"), ("Language", "name"), ("Year", "value"),
                        ("Rating", "value"), ("Votes", "value")}:  # fmt: skip
        store.query(
            f"CREATE INDEX user_{label.lower()}_{prop} IF NOT EXISTS FOR (n:{label}) ON (n.{prop})",
            write=True,
        )
    sent = 0
    for rel, rows in metaqa_kb_rows(limit_movies).items():
        rtype, label, prop = METAQA_TAILS[rel]
        text = (
            f"UNWIND $rows AS row MERGE (m:Movie:{graph} {{title: row.head}}) "
            f"MERGE (t:{label}:{graph} {{{prop}: row.tail}}) MERGE (m)-[:{rtype}]->(t)"
        )
        for i in range(0, len(rows), 5000):
            store.query(text, {"rows": rows[i : i + 5000]}, write=True)
        sent += len(rows)
    return sent


def snapshot(store, graph: str) -> dict:
    """Everything of a user graph that cpr must never change: node count, every node's
    labels and properties, every relationship's ends, type and properties (sorted)."""
    nodes = store.query(
        f"MATCH (n:{graph}) RETURN elementId(n) AS id, labels(n) AS labels, "
        "properties(n) AS props ORDER BY id"
    )[0]
    rels = store.query(
        f"MATCH (a:{graph})-[r]->(b) RETURN elementId(r) AS id, elementId(a) AS a, "
        "type(r) AS type, elementId(b) AS b, properties(r) AS props ORDER BY id"
    )[0]
    return {
        "nodes": [(r["id"], sorted(r["labels"]), sorted(r["props"].items())) for r in nodes],
        "rels": [(r["id"], r["a"], r["type"], r["b"], sorted(r["props"].items())) for r in rels],
    }


def drop(store, graph: str) -> None:
    with store.driver.session(database=store.database) as session:  # IN TRANSACTIONS
        session.run(
            f"MATCH (n:{graph}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS"
        ).consume()
