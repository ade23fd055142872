"""Write rog_small.parquet and rog_small.jsonl: the same five questions in the RoG schema.

Real RoG rows (rmanluo/RoG-webqsp) have the fields id, question, answer, q_entity, a_entity,
graph (list of [head, relation, tail] with entity names, CVT nodes as MIDs) and choices.
Run: python tests/data/make_rog_small.py
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent

ROWS = [
    {
        "id": "WebQTest-0",
        "question": "what does jamaican people speak",
        "answer": ["Jamaican English", "Jamaican Creole English Language"],
        "q_entity": ["Jamaica"],
        "a_entity": ["Jamaican English", "Jamaican Creole English Language"],
        "graph": [
            ["Jamaica", "location.country.languages_spoken", "Jamaican English"],
            ["Jamaica", "location.country.languages_spoken", "Jamaican Creole English Language"],
            ["Jamaica", "location.country.official_language", "Jamaican English"],
            ["Jamaica", "location.location.containedby", "Caribbean"],
            ["Jamaica", "location.country.capital", "Kingston"],
            ["Jamaican English", "language.human_language.countries_spoken_in", "Jamaica"],
        ],
        "choices": [],
    },
    {
        "id": "WebQTest-1",
        "question": "where was barack obama born",
        "answer": ["Honolulu"],
        "q_entity": ["Barack Obama"],
        "a_entity": ["Honolulu"],
        "graph": [
            ["Barack Obama", "people.person.place_of_birth", "Honolulu"],
            ["Barack Obama", "people.person.nationality", "United States of America"],
            ["Honolulu", "location.location.containedby", "Hawaii"],
            ["Hawaii", "location.location.containedby", "United States of America"],
            ["Barack Obama", "people.person.date_of_birth", "1961-08-04"],
        ],
        "choices": [],
    },
    {
        "id": "WebQTest-2",
        "question": "who plays ken barlow in coronation street",
        "answer": ["William Roache"],
        "q_entity": ["Coronation Street", "Ken Barlow"],
        "a_entity": ["William Roache"],
        "graph": [  # a CVT node, named by its MID as in RoG
            ["Coronation Street", "tv.tv_program.regular_cast", "m.03hqm1h"],
            ["m.03hqm1h", "tv.regular_tv_appearance.actor", "William Roache"],
            ["m.03hqm1h", "tv.regular_tv_appearance.character", "Ken Barlow"],
            ["Coronation Street", "tv.tv_program.country_of_origin", "United Kingdom"],
        ],
        "choices": [],
    },
    {
        "id": "WebQTest-3",
        "question": "what currency does egypt use",
        "answer": ["Egyptian pound"],
        "q_entity": ["Egypt"],
        "a_entity": ["Egyptian pound"],  # not in its graph: unreachable, as happens in RoG
        "graph": [
            ["Egypt", "location.country.capital", "Cairo"],
            ["Egypt", "location.country.official_language", "Modern Standard Arabic"],
            ["Cairo", "location.location.containedby", "Egypt"],
        ],
        "choices": [],
    },
    {
        "id": "WebQTest-4",
        "question": "when was barack obama born",
        "answer": ["1961-08-04"],
        "q_entity": ["Barack Obama"],
        "a_entity": [],  # the loader falls back to `answer`
        "graph": [
            ["Barack Obama", "people.person.date_of_birth", "1961-08-04"],
            ["Barack Obama", "people.person.place_of_birth", "Honolulu"],
        ],
        "choices": [],
    },
]

SCHEMA = {
    "id": pl.Utf8,
    "question": pl.Utf8,
    "answer": pl.List(pl.Utf8),
    "q_entity": pl.List(pl.Utf8),
    "a_entity": pl.List(pl.Utf8),
    "graph": pl.List(pl.List(pl.Utf8)),
    "choices": pl.List(pl.Utf8),
}


def main() -> None:
    pl.DataFrame(ROWS, schema=SCHEMA).write_parquet(HERE / "rog_small.parquet")
    with open(HERE / "rog_small.jsonl", "w", encoding="utf-8") as out:
        for row in ROWS:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
