"""Named Cypher statements (cypher/NAME.cypher) and safe relationship-type quoting."""

from __future__ import annotations

import re
from functools import cache

from cpr_neo4j.config import resource_dir
from cpr_neo4j.errors import BadInput
from cpr_neo4j.text import is_valid_rel_type

_PLACEHOLDER = "$$REL_TYPE$$"


@cache
def statement(name: str) -> str:
    """The text of cypher/NAME.cypher (comment lines kept: Cypher ignores them)."""
    if not re.fullmatch(r"[a-z0-9_]+", name):
        raise ValueError(f"bad statement name {name!r}")
    path = resource_dir("cypher") / f"{name}.cypher"
    if not path.exists():
        raise FileNotFoundError(f"no Cypher statement named {name!r} ({path})")
    return path.read_text()


def rel_type(name: str) -> str:
    """Validate a relationship type taken from data and return it backtick-quoted."""
    if not is_valid_rel_type(name):
        raise BadInput(
            f"relation name {name!r} is not allowed as a Neo4j relationship type "
            "(letters, digits, _ . - : / and inner spaces only)"
        )
    return f"`{name}`"


def with_rel_type(name: str, relation: str) -> str:
    """A statement whose relationship type is fixed per call (Cypher cannot parameterise types)."""
    text = statement(name)
    if _PLACEHOLDER not in text:
        raise ValueError(f"statement {name!r} has no {_PLACEHOLDER} placeholder")
    return text.replace(_PLACEHOLDER, rel_type(relation))
