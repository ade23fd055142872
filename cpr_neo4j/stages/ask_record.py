"""What `cpr ask` shows and records of an answer: its path in words and its (:Ask) record
(graph/records.py `save_asks`), with the Browser link that draws it."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any

from cpr_neo4j.config import local_server_settings
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.neo4j_server.browser import ask_link, ask_query
from cpr_neo4j.text import cvt_label, is_mid

MAX_PATHS_RECORDED = 50  # answers whose best path is linked on the :Ask node (Browser view)


def describe(relpath, chain: list[str], names: dict[str, str]) -> str:
    """`John Krasinski <-starred_actors- Away We Go -directed_by-> Sam Mendes`; an unnamed
    Freebase CVT between two steps reads as its type (`[regular tv appearance]`)."""
    parts = [names.get(chain[0], chain[0])]
    steps = list(relpath)
    for i, (step, entity) in enumerate(zip(steps, chain[1:], strict=True)):
        arrow = f"-{step.relation}->" if step.forward else f"<-{step.relation}-"
        name = names.get(entity, entity)
        if i + 1 < len(steps) and name == entity and is_mid(entity):
            name = cvt_label(step, steps[i + 1])
        parts += [arrow, name]
    return " ".join(parts)


def record(session: Any, d: Any, names: dict[str, str | None] | None = None) -> dict:
    """The (:Ask) record of one drafted question (graph/records.py `save_asks`); names:
    the path entities' names as looked up for the answer (None: none known)."""
    cal, req = session.cal, session.request
    return {
        "id": uuid.uuid4().hex[:12],
        "dataset": session.dataset,
        "props": {
            "question": d.text,
            "dataset": session.dataset,
            "alpha": req.alpha,
            "delta": req.pac,
            "risk": req.risk,
            "tau": d.threshold.value,
            "group": d.threshold.group,
            "allow_empty": req.allow_empty,
            "guaranteed": d.guaranteed,
            "n": d.threshold.n,
            "model_id": cal["model"],
            "calibration_id": cal["id"],
            "answer_count": len(d.answers),
            "linking": json.dumps(d.linked.record(), sort_keys=True),
            "created": datetime.now(timezone.utc).isoformat(),
        },
        "topics": [t["id"] for t in d.linked.topics],
        "answers": [
            {"id": a.id, "rank": a.rank, "cost": a.cost, "path": a.path}
            | (_hops(a, d.relpaths[a.id]) if a.rank <= MAX_PATHS_RECORDED else {})
            for a in d.answers
        ],
    } | ({} if names is None else {"mediators": mediators(d.answers, names)})


def mediators(answers: list[Any], names: dict[str, str | None]) -> list[str]:
    """The recorded paths' entities that the write must check for the :Mediator label
    (cypher/create_ask.cypher labels those named by a bare Freebase MID): those whose name
    is one, and those whose name is not known here. Sending only these spares the write a
    lookup per path entity where no node is a CVT (MetaQA: every name is a word)."""
    return sorted(
        {
            e
            for a in answers
            if a.rank <= MAX_PATHS_RECORDED
            for e in a.entities
            if e not in names or is_mid(names[e])
        }
    )


def _hops(a: Any, relpath) -> dict:
    """The answer's best path for its record: entity ids (topic first), each hop's type and
    way, so the Browser view shows exactly the hops TreeG took."""
    return {
        "nodes": a.entities,
        "rels": [step.relation for step in relpath],
        "forward": [bool(step.forward) for step in relpath],
    }


def browser_link(store: GraphStore, ask_id: str) -> tuple[str | None, str]:
    """(Neo4j Browser link with the connection filled in, when the local server is the one
    in use; the Cypher to paste)."""
    local = local_server_settings()
    url = None
    if local and store.settings.uri == local["uri"]:
        user = local.get("username", "neo4j")
        url = ask_link(local["http"], local["uri"], ask_id, user, store.database or "neo4j")
    return url, ask_query(ask_id)
