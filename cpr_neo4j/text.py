"""Question and relation text helpers shared by loaders, search and the model."""

from __future__ import annotations

import re

_BRACKET = re.compile(r"\[([^\]]+)\]")
MASK = "ENT"


def bracket_mentions(text: str) -> list[str]:
    """Topic mentions written as [name] (MetaQA style)."""
    return [m.strip() for m in _BRACKET.findall(text)]


def mask_question(text: str, mentions: list[str] | tuple[str, ...] = ()) -> str:
    """The question with its topic-entity mentions replaced by a fixed token.

    Masking makes question embeddings depend on the question's form, not on the
    entity, so MetaQA's ~45k questions collapse to a few hundred texts (cacheable).
    """
    masked = _BRACKET.sub(MASK, text)
    for mention in sorted(mentions, key=len, reverse=True):
        if mention:
            masked = re.sub(re.escape(mention), MASK, masked, flags=re.IGNORECASE)
    return " ".join(masked.split())


def readable_relation(name: str) -> str:
    """Readable text: `people.person.place_of_birth` -> `person place of birth`.

    `directed_by` -> `directed by`.
    """
    parts = name.split(".")
    tail = parts[-2:] if len(parts) >= 2 else parts
    return " ".join(" ".join(tail).replace("_", " ").split())
