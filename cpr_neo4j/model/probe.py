"""Texts the exported encoder must embed as sentence-transformers does (model.export checks).

What we embed in practice: masked MetaQA-style questions, step texts (forward, and reverse
with the ENT mask), relation-path texts joined by " then ", Freebase-style relation words;
plus the edges: an empty text, a text past the 256-token truncation, non-ASCII letters,
scripts and emoji, digits and punctuation.
"""

from __future__ import annotations

QUESTIONS = (
    "which movies did ENT direct",
    "what movies did ENT write",
    "who directed the movies starred by ENT",
    "who acted in the movies directed by ENT",
    "what genres are the films directed by ENT",
    "the films starred by ENT were released in which years",
    "what languages are the films written by ENT in",
    "who are the writers of the films that share actors with ENT",
    "which person directed the films acted by ENT",
    "what types are the movies written by the director of ENT",
    "when were the movies acted by ENT released",
    "ENT is a movie directed by who",
    "what is the imdb rating of ENT",
    "can you name a film directed by ENT",
    "who wrote ENT",
    "where was ENT born",
)
STEPS = (
    "directed by",
    "directed by ENT",
    "starred actors",
    "starred actors ENT",
    "written by ENT",
    "has genre",
    "has genre ENT",
    "release year",
    "in language ENT",
    "has tags",
    "has imdb rating",
    "has imdb votes ENT",
    "person place of birth",
    "film film directed by ENT",
)
PATHS = (
    "starred actors ENT then directed by",
    "directed by ENT then starred actors",
    "written by ENT then in language",
    "starred actors ENT then release year",
    "directed by ENT then has genre",
    "starred actors ENT then starred actors ENT then written by",
    "written by ENT then directed by then has genre ENT",
    "has tags ENT then has imdb votes then release year",
)
EDGES = (
    "",
    " ",
    "ENT",
    "a",
    "films directed by Pedro Almodóvar in español",
    "Amélie, Le Fabuleux Destin d'Amélie Poulain (2001)",
    "who directed 千と千尋の神隠し",
    "Москва слезам не верит",
    "ταινίες του Αγγελόπουλου",
    "which movies did ENT direct 🎬🍿",
    "what was the release year of 2001: A Space Odyssey? (1968!)",
    "WHICH MOVIES DID ENT DIRECT",
    " then ".join(["starred actors ENT", "directed by", "written by ENT"] * 30),  # > 256 tokens
    "word " * 300,  # far past the truncation
)
PROBE_TEXTS: tuple[str, ...] = QUESTIONS + STEPS + PATHS + EDGES
