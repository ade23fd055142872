"""`cpr ask`: link entities, run TreeG with the calibrated scorer, cut at the question's
threshold (conformal/guarantee.py), record an :Ask."""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from cpr_neo4j.config import local_server_settings
from cpr_neo4j.conformal.guarantee import Threshold, cut_set
from cpr_neo4j.conformal.threshold import percent
from cpr_neo4j.errors import EMPTY_QUESTION, CprError, Unattainable
from cpr_neo4j.graph import entity_index, records
from cpr_neo4j.graph.linking import link
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.neo4j_server.browser import ask_link, ask_query
from cpr_neo4j.search.adjacency_cache import ANSWER_CACHE_ENTITIES, CachedAdjacency
from cpr_neo4j.search.base import RelPath
from cpr_neo4j.search.treeg import Retrieval
from cpr_neo4j.stages.retrieval import Retriever
from cpr_neo4j.stages.scoring import answer_scores, columns
from cpr_neo4j.stages.session import Session, check_linking, open_session
from cpr_neo4j.text import cvt_label, is_mid, mask_question

MAX_PATHS_RECORDED = 50  # answers whose best path is linked on the :Ask node (Browser view)


@dataclass
class Answer:
    id: str
    name: str
    rank: int
    cost: float  # the answer's score under the calibration's family, cut at the threshold
    path: str  # the best path, entity names and relation arrows
    entities: list[str]  # entity ids along the best path, topic first
    entity_names: list[str] = field(default_factory=list)  # their names, in the same order


@dataclass
class AskResult:
    question: str
    dataset: str
    topics: list[dict]
    alpha: float
    tau: float  # this question's threshold (its group's; lambda-hat in FNR mode)
    n: int  # calibration questions the threshold came from
    answers: list[Answer]
    best_outside: Answer | None  # the top-ranked answer when the set is empty
    ask_id: str
    model_id: str
    calibration_id: str
    browser_url: str | None
    cypher: str
    notes: list[str] = field(default_factory=list)
    delta: float | None = None
    guarantee: str | None = None  # None: no guarantee holds for this set (see notes)
    risk: str = "coverage"
    group: int = 0  # the question's group (the hop count of its best answer's path)
    allow_empty: bool = False


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


@dataclass
class Linked:
    topics: list[dict]  # [{id, name}]
    notes: list[str]
    masked: str  # the question with its topic mentions masked, as the scorer reads it


Entity = str | Sequence[str] | None  # --entity, possibly repeated


def link_question(session: Session, text: str, entity: Entity) -> Linked:
    """Topic entities of one question, linked the way its calibration was."""
    if not text or not text.strip():
        raise CprError(EMPTY_QUESTION)
    check_linking(session.cal, entity)
    topics, notes = link(session.store, session.dataset, text, entity, graph=session.graph)
    return Linked(topics, notes, mask_question(text, [t["name"] for t in topics]))


def answer(
    session: Session, text: str, entity: Entity = None, linked: Linked | None = None
) -> AskResult:
    """One question under an open session: link, search, cut, record an :Ask."""
    linked = linked or link_question(session, text, entity)
    retrieval = session.retriever.run(linked.masked, _topic_ids(linked), text)
    return _finish(session, [_cut(session, text, linked, retrieval)])[0]


def ask_many(
    session: Session, items: Iterable[tuple[str, Entity]], chunk: int = 64
) -> Iterator[AskResult | CprError]:
    """(question, entity) pairs in order: a result, or the CprError that question raised
    (the others go on). Per `chunk` questions: one embedding batch, one round trip per hop
    for all their searches, one name lookup and one write of their :Ask records. Entities
    fetched for one chunk stay cached for the next (hubs recur from question to question)."""
    r = session.retriever
    if isinstance(r, Retriever) and not isinstance(r.source, CachedAdjacency):
        r.source = CachedAdjacency(r.source, max_entities=ANSWER_CACHE_ENTITIES)
    it = iter(items)
    while pending := list(itertools.islice(it, chunk)):
        yield from _answer_chunk(session, pending)


def _answer_chunk(session: Session, pending: list[tuple[str, Entity]]) -> list:
    out: dict[int, AskResult | CprError] = {}
    linked: dict[int, Linked] = {}
    for i, (text, entity) in enumerate(pending):
        try:
            linked[i] = link_question(session, text, entity)
        except CprError as exc:
            out[i] = exc
    session.retriever.scorer.questions([x.masked for x in linked.values()])
    found = session.retriever.run_many(
        [(x.masked, _topic_ids(x), pending[i][0], None) for i, x in linked.items()]
    )
    drafts: dict[int, Draft] = {}
    for (i, x), retrieval in zip(linked.items(), found, strict=True):
        if isinstance(retrieval, CprError):
            out[i] = retrieval
            continue
        try:
            drafts[i] = _cut(session, pending[i][0], x, retrieval)
        except CprError as exc:
            out[i] = exc
    try:
        out.update(zip(drafts, _finish(session, list(drafts.values())), strict=True))
    except CprError as exc:  # the chunk's shared lookup or write: none was recorded
        out.update(dict.fromkeys(drafts, exc))
    return [out[i] for i in range(len(pending))]


def _topic_ids(linked: Linked) -> list[str]:
    return [t["id"] for t in linked.topics]


@dataclass
class Draft:
    """One question between its search and its record: the set cut, not yet named."""

    text: str
    linked: Linked
    answers: list[Answer]
    best_outside: Answer | None
    relpaths: dict[str, RelPath]
    threshold: Threshold
    guaranteed: bool
    notes: list[str]

    def described(self) -> list[Answer]:
        return self.answers + ([self.best_outside] if self.best_outside else [])


def _cut(session: Session, text: str, linked: Linked, retrieval: Retrieval) -> Draft:
    """The answers within the question's threshold (plus its top level unless empty sets
    were asked for) with their best paths."""
    req, cal = session.request, session.cal
    cols = columns(retrieval, session.spec, bool(cal.get("topic_answers")))
    scores = answer_scores(cols, session.spec)
    th = session.calibrated.threshold(req, cols.group)
    notes = []
    if not th.attainable:
        if not session.all_candidates:
            raise Unattainable(
                f"alpha={req.alpha:g} cannot be honoured by calibration {cal['id']}: "
                f"{th.why}; ask with a larger --alpha, or pass --all-candidates for every "
                "candidate without a guarantee"
            )
        notes.append(
            f"NO GUARANTEE: {th.why}; the set is every candidate, which holds a correct "
            f"answer for only about {percent(cal.get('recall', math.nan))} of questions "
            f"(the calibration's retrieval recall), not {percent(1 - req.alpha)}"
        )
    order = np.lexsort((np.arange(len(scores)), scores))  # ties: rank by (cost, id)
    inside = cut_set(scores, th, req)
    relpaths: dict[str, RelPath] = {}

    def answer_at(rank: int, k: int) -> Answer:
        entity = cols.ids[k]
        relpaths[entity], chain, _ = retrieval.witness(entity)
        return Answer(entity, entity, rank, float(scores[k]), "", chain)

    kept = [int(k) for k in order if inside[k]]
    answers = [answer_at(i + 1, k) for i, k in enumerate(kept)]
    best_outside = answer_at(1, int(order[0])) if not answers and len(order) else None
    guaranteed = th.attainable and session.no_guarantee is None
    return Draft(text, linked, answers, best_outside, relpaths, th, guaranteed, notes)


def _finish(session: Session, drafts: list[Draft]) -> list[AskResult]:
    """Name, record and report drafted questions: one name lookup and one :Ask write for
    all of them (`session.save`, when set, takes each record and batches them itself)."""
    if not drafts:
        return []
    ids = sorted({e for d in drafts for a in d.described() for e in a.entities})
    names = entity_index.names(session.store, session.dataset, ids, session.graph) if ids else {}
    for d in drafts:
        for a in d.described():
            a.name = names.get(a.id, a.id)
            a.entity_names = [names.get(e, e) for e in a.entities]
            a.path = describe(d.relpaths[a.id], a.entities, names)
    asks = [_record(session, d) for d in drafts]
    if session.save is not None:
        for record in asks:
            session.save(record)
    else:
        records.save_asks(session.store, asks)  # one transaction
    return [_result(session, d, record["id"]) for d, record in zip(drafts, asks, strict=True)]


def _record(session: Session, d: Draft) -> dict:
    """The (:Ask) record of one drafted question (graph/records.py `save_asks`)."""
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
            "created": datetime.now(timezone.utc).isoformat(),
        },
        "topics": _topic_ids(d.linked),
        "answers": [
            {"id": a.id, "rank": a.rank, "cost": a.cost, "path": a.path}
            | (_hops(a, d.relpaths[a.id]) if a.rank <= MAX_PATHS_RECORDED else {})
            for a in d.answers
        ],
    }


def _result(session: Session, d: Draft, ask_id: str) -> AskResult:
    cal, req = session.cal, session.request
    notes = (
        list(d.linked.notes) + d.notes + ([session.no_guarantee] if session.no_guarantee else [])
    )
    url, cypher = browser_link(session.store, ask_id)
    sentence = session.calibrated.sentence(req, d.threshold) if d.guaranteed else None
    caveat = session.calibrated.caveat(req, d.threshold) if d.guaranteed else None
    if caveat:  # a fallback threshold: say what the guarantee is not, next to the notes
        notes.append(f"fallback threshold: {caveat}")
    return AskResult(
        d.text,
        session.dataset,
        d.linked.topics,
        req.alpha,
        d.threshold.value,
        d.threshold.n,
        d.answers,
        d.best_outside,
        ask_id,
        cal["model"],
        cal["id"],
        url,
        cypher,
        notes,
        req.pac,
        sentence,
        req.risk,
        d.threshold.group,
        req.allow_empty,
    )


def _hops(a: Answer, relpath) -> dict:
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


def ask(
    store: GraphStore, text: str, alpha: float, *, entity: Entity = None, **options
) -> AskResult:
    """One question: `open_session(store, alpha, **options)` + `answer`."""
    if not text or not text.strip():  # before loading anything
        raise CprError(EMPTY_QUESTION)
    return answer(open_session(store, alpha, **options), text, entity)
