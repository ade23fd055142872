"""Parsing an LLM's relation-chain reply into valid chains.

Chains naming relations that do not exist (or too many) are dropped (parse_chains warns;
the providers in hints/llm.py count them in their stats); a reply with no chains list is a
HintFailed error (the providers give it one corrective follow-up first).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from cpr_neo4j.errors import HintFailed
from cpr_neo4j.hints.base import MAX_CHAINS

log = logging.getLogger(__name__)


def _norm(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().lstrip("~").strip().lower())


def relation_lookup(relations: list[str]) -> dict[str, str]:
    """Spellings a model may use -> relation type: the name (any case, spaces for
    underscores, a leading "~"), and a dotted Freebase name's last part when unique."""
    table = {_norm(r): r for r in relations}
    tails: dict[str, list[str]] = {}
    for r in relations:
        if "." in r:
            tails.setdefault(_norm(r.rsplit(".", 1)[1]), []).append(r)
    for tail, names in tails.items():
        if len(names) == 1:
            table.setdefault(tail, names[0])
    return table


def parse_reply(reply: str, relations: list[str], hops: int) -> tuple[list[list[str]], int]:
    """(valid chains, how many were dropped); HintFailed when there is no chains list."""
    data = _loads(reply)
    if isinstance(data, dict):
        data = data.get("chains")
    if not isinstance(data, list):
        shown = " ".join(reply.split())[:120]
        raise HintFailed(f"the hint LLM's reply has no chains list: {shown!r}")
    allowed = relation_lookup(relations)
    chains: list[list[str]] = []
    dropped = 0
    for item in data:
        raw = [item] if isinstance(item, str) else item
        if not isinstance(raw, list) or not raw or not all(isinstance(r, str) for r in raw):
            dropped += 1
            continue
        names = [allowed.get(_norm(r)) for r in raw]
        if None in names or len(names) > hops:
            dropped += 1
            continue
        if names not in chains:
            chains.append(names)  # type: ignore[arg-type]
    return chains, dropped


def parse_chains(
    reply: str, relations: list[str], hops: int, max_chains: int = MAX_CHAINS
) -> list[list[str]]:
    """Valid chains from an LLM reply; malformed parts are dropped with a warning, and a
    reply without a chains list is a HintFailed error.

    Accepted: {"chains": [...]} or a bare list; a string item counts as a one-relation
    chain (small models mix both). Relation names map back to relation types through
    relation_lookup. A chain with any invented relation, a non-string item, or more than
    `hops` relations is dropped whole (a partial chain would mean another path).
    """
    chains, dropped = checked_chains(reply, relations, hops)
    if dropped:
        log.warning("dropped %d malformed/invented/too-long hint chain(s)", dropped)
    return chains[:max_chains]


def checked_chains(reply: str, relations: list[str], hops: int) -> tuple[list[list[str]], int]:
    """Valid chains and how many were dropped (providers sum these into their stats line
    rather than warning once per question)."""
    chains, dropped = parse_reply(reply, relations, hops)
    if len(chains) > MAX_CHAINS:
        log.warning("hint reply had %d chains; keeping the first %d", len(chains), MAX_CHAINS)
    return chains[:MAX_CHAINS], dropped


def _loads(reply: str) -> Any:
    text = re.sub(r"<think>.*?</think>", "", reply, flags=re.DOTALL).strip()
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", text)
    try:
        return json.loads(text)
    except ValueError:
        pass
    start, end = text.find("{"), text.rfind("}")  # JSON wrapped in prose
    if 0 <= start < end:
        try:
            return json.loads(text[start : end + 1])
        except ValueError:
            pass
    return None
