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


# A bare Freebase MID (`m.0abc12`) or Google KG id (`g.11b6...`): the only "name" a CVT
# (mediator) node has, and the id of many named entities in sources without names.
# Letters, digits, underscore, dot, dash, colon, slash and space: enough for Freebase
# (`people.person.place_of_birth`), MetaQA and most user graphs. Everything else,
# backticks and backslashes above all, could break out of graph/cypher.py's quoting.
_REL_TYPE = re.compile(r"^[\w.\-:/ ]{1,200}$")


def is_valid_rel_type(name: str) -> bool:
    """Whether a relation name from data may be a Neo4j relationship type (loaders check
    their files with it; graph/cypher.py `rel_type` refuses the rest)."""
    return isinstance(name, str) and bool(_REL_TYPE.fullmatch(name)) and name.strip() == name


_MID = re.compile(r"^[mg]\.[0-9A-Za-z_]+$")


def is_mid(text: str | None) -> bool:
    return bool(text) and _MID.fullmatch(text) is not None


def readable_relation(name: str) -> str:
    """Readable text: `people.person.place_of_birth` -> `person place of birth`.

    `directed_by` -> `directed by`. Freebase names keep their last two parts (type and
    property: the domain adds nothing the question says). A name that is itself an id
    (`m.0xyz`) or has no words stays as it is, rather than becoming `m 0xyz` or nothing.
    """
    if is_mid(name):
        return name
    parts = [p for p in name.split(".") if p]
    tail = parts[-2:] if len(parts) >= 2 else parts
    return " ".join(" ".join(tail).replace("_", " ").split()) or name


def _freebase_part(relation: str, index: int) -> str | None:
    """One part of a Freebase name (domain.type.property) as words; None for other names."""
    parts = relation.split(".")
    if len(parts) < 3:
        return None
    return " ".join(parts[index].replace("_", " ").split()) or None


def _freebase_type(relation: str) -> str | None:
    """`tv.regular_tv_appearance.actor` -> `regular tv appearance` (the head's type)."""
    return _freebase_part(relation, -2)


def freebase_property(relation: str) -> str | None:
    """`people.person.place_of_birth` -> `place of birth`; None for a non-Freebase name."""
    return _freebase_part(relation, -1)


def cvt_label(into: tuple[str, bool] | None, out: tuple[str, bool] | None) -> str:
    """How a path shows an unnamed CVT (mediator) node between the steps `into` and `out`
    ((relation, forward) each): `[regular tv appearance]`, its Freebase type, read off a
    relation the CVT is the head of (the next step forward, or the step into it reversed);
    else `[regular cast]` from the relation into it; else `[CVT]`."""
    kind = None
    if out is not None and out[1]:
        kind = _freebase_type(out[0])
    if kind is None and into is not None and not into[1]:
        kind = _freebase_type(into[0])
    if kind is None and into is not None:
        kind = readable_relation(into[0].rsplit(".", 1)[-1])
    return f"[{kind or 'CVT'}]"
