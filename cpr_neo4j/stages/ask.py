"""`cpr ask`: link entities, run TreeG with the calibrated scorer, cut at tau, record an :Ask."""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone

from cpr_neo4j.config import local_server_settings
from cpr_neo4j.conformal.threshold import centred, percent
from cpr_neo4j.errors import EMPTY_QUESTION, Conflict, CprError, StaleCalibration, Unattainable
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.graph.fingerprint import stale_reason
from cpr_neo4j.graph.linking import link
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.store import scorer_for
from cpr_neo4j.neo4j_server.browser import ask_link, ask_query
from cpr_neo4j.search.adjacency_cache import ANSWER_CACHE_ENTITIES, CachedAdjacency
from cpr_neo4j.search.base import RelPath
from cpr_neo4j.search.hints import HintProvider
from cpr_neo4j.search.treeg import Retrieval
from cpr_neo4j.stages.calibrate import GOLD, TEXT, tau_for, why_unattainable
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever, check_scope
from cpr_neo4j.text import cvt_label, is_mid, mask_question

MAX_PATHS_RECORDED = 50  # answers whose best path is linked on the :Ask node (Browser view)


@dataclass
class Answer:
    id: str
    name: str
    rank: int
    cost: float
    path: str  # the best path, entity names and relation arrows
    entities: list[str]  # entity ids along the best path, topic first
    entity_names: list[str] = field(default_factory=list)  # their names, in the same order


@dataclass
class AskResult:
    question: str
    dataset: str
    topics: list[dict]
    alpha: float
    tau: float
    n: int
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


def guarantee_sentence(alpha: float, delta: float | None) -> str:
    """What a finite conformal tau promises (plain: on average over calibration draws)."""
    if delta is None:
        return (
            f"for questions like the calibration ones, a set made this way contains a correct "
            f"answer with probability at least {percent(1 - alpha)} (on average over calibration "
            f"draws; add --delta for a guarantee that holds for this calibration)"
        )
    return (
        f"with probability at least {percent(1 - delta)} over the calibration draw, sets made "
        f"with this calibration contain a correct answer for at least {percent(1 - alpha)} of "
        f"questions like the calibration ones"
    )


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


def _pick_dataset(store: GraphStore, dataset: str | None, model_id: str | None = None) -> str:
    """The named dataset, else the newest calibrated one (of `model_id`, when named)."""
    found = dataset or records.default_dataset(store, model_id)
    if not found:
        raise CprError("no calibration yet: run `cpr train DATASET` then `cpr calibrate DATASET`")
    return found


def check_settings(cal: dict, wanted: RetrievalSettings) -> None:
    """Refuse a calibration made with other retrieval or hint settings: no guarantee then."""
    pinned = {
        k: cal.get(k)
        for k in (
            "hops",
            "beam_width",
            "active",
            "fanout_cap",
            "hint_mode",
            "hint_beta",
            "hint_prompt",
        )
    }
    asked = {k: getattr(wanted, k) for k in pinned}
    diff = [
        f"{k} {asked[k]} (calibrated with {pinned[k]})"
        for k in pinned
        if pinned[k] is not None and asked[k] != pinned[k]
    ]
    if diff:  # Conflict: `cpr serve` answers 409, the CLI prints the line and exits 1
        raise Conflict(
            "the calibration does not match this request: "
            + "; ".join(diff)
            + ": ask with the calibrated settings or run `cpr calibrate` with these"
        )


@dataclass
class Linked:
    topics: list[dict]  # [{id, name}]
    notes: list[str]
    masked: str  # the question with its topic mentions masked, as the scorer reads it


@dataclass
class Session:
    """What every question of one request shares: the calibration, its tau at alpha, the
    retriever with its loaded scorer, and why a guarantee does not hold (None: it does)."""

    store: GraphStore
    dataset: str
    cal: dict
    alpha: float
    delta: float | None
    tau: float
    retriever: Retriever
    no_guarantee: str | None  # a NO GUARANTEE / STALE note when no guarantee holds
    # Writes an :Ask record; `cpr serve` passes one that commits concurrent asks together.
    save: Callable[[dict], None] | None = None
    graph: str = ""  # the dataset's fingerprint when the session opened


def open_session(
    store: GraphStore,
    alpha: float,
    dataset: str | None = None,
    model_id: str | None = None,
    beam_width: int | None = None,
    active: int | None = None,
    hints: HintProvider | None = None,
    hint_beta: float | None = None,
    hops_filter: int | None = None,
    delta: float | None = None,
    all_candidates: bool = False,
    allow_stale: bool = False,
    cal: dict | None = None,
) -> Session:
    """Check the request against the newest matching calibration (`cal`: already read by
    the caller for these dataset, model and hops); errors before any search."""
    dataset = _pick_dataset(store, dataset, model_id)
    cal = cal or records.latest_calibration(store, dataset, model_id, hops_filter)
    if cal is None:
        raise CprError(
            f"dataset {dataset!r} has no calibration"
            + (f" for model {model_id}" if model_id else " of a CPR model")
            + (f" trained on {hops_filter}-hop questions" if hops_filter else "")
            + f": run `cpr calibrate {dataset}"
            + (f" --model {model_id}" if model_id else "")
            + (f" --hops {hops_filter}" if hops_filter else "")
            + "`"
        )
    mode = hints.mode if hints is not None and hints.mode != "none" else "none"
    wanted = RetrievalSettings(
        hops=cal["hops"],
        beam_width=beam_width or cal["beam_width"],
        active=active or cal["active"],
        fanout_cap=cal["fanout_cap"],
        hint_mode=mode,
        hint_beta=(hint_beta if hint_beta is not None else cal["hint_beta"])
        if mode != "none"
        else 0.0,
        hint_prompt=hints.prompt if hints is not None and mode != "none" else "",
    )
    check_settings(cal, wanted)
    check_scope(cal)  # a new question has no subgraph of its own
    graph = fingerprint.current(store, dataset, cal.get("graph_now"))
    stale = stale_reason(cal.get("graph_fingerprint"), graph)
    if stale and not allow_stale:
        raise StaleCalibration(
            f"calibration {cal['id']} no longer fits dataset {dataset!r}: {stale}; run "
            f"`cpr calibrate {dataset}` again (or pass --allow-stale to answer without a "
            "guarantee)"
        )
    tau = tau_for(cal, alpha, delta)
    why = why_unattainable(cal, alpha, delta) if math.isinf(tau) else None
    if why and not all_candidates:
        raise Unattainable(
            f"alpha={alpha:g} cannot be honoured by calibration {cal['id']}: {why}; ask with "
            "a larger --alpha, or pass --all-candidates for every candidate without a guarantee"
        )
    notes = []
    if stale:
        notes.append(f"STALE CALIBRATION, NO GUARANTEE: {stale}; run `cpr calibrate {dataset}`")
    if why:
        notes.append(
            f"NO GUARANTEE: {why}; tau = +inf, so the set is every candidate and it holds a "
            f"correct answer for only about {percent(cal.get('recall', math.nan))} of questions "
            f"(the calibration's retrieval recall), not {percent(1 - alpha)}"
        )
    scorer = scorer_for(cal["model"])  # `cpr serve` lends a loaded one
    retriever = Retriever(store, dataset, scorer, wanted, hints)
    no_guarantee = "; ".join(notes) or None
    return Session(store, dataset, cal, alpha, delta, tau, retriever, no_guarantee, graph=graph)


def check_linking(cal: dict, entity: str | None) -> None:
    """The guarantee covers the linking the calibration used: refuse the other one."""
    calibrated = cal.get("linking") or GOLD
    if entity is None and calibrated == GOLD:
        raise Conflict(
            f"calibration {cal['id']} used the dataset's gold topic entities, so it covers "
            "questions asked with --entity: pass --entity, or run `cpr calibrate "
            f"{cal.get('dataset')} --linking text` to cover linking from the question text"
        )
    if entity is not None and calibrated == TEXT:
        raise Conflict(
            f"calibration {cal['id']} links topic entities from the question text, as `cpr "
            "ask` does without --entity: drop --entity (name the entity in [brackets]), or "
            f"run `cpr calibrate {cal.get('dataset')} --linking gold`"
        )


def link_question(session: Session, text: str, entity: str | None) -> Linked:
    """Topic entities of one question, linked the way its calibration was."""
    if not text or not text.strip():
        raise CprError(EMPTY_QUESTION)
    check_linking(session.cal, entity)
    topics, notes = link(session.store, session.dataset, text, entity)
    return Linked(topics, notes, mask_question(text, [t["name"] for t in topics]))


def answer(
    session: Session, text: str, entity: str | None = None, linked: Linked | None = None
) -> AskResult:
    """One question under an open session: link, search, cut at tau, record an :Ask."""
    linked = linked or link_question(session, text, entity)
    retrieval = session.retriever.run(linked.masked, _topic_ids(linked), text)
    return _finish(session, [_cut(session, text, linked, retrieval)])[0]


def ask_many(
    session: Session, items: Iterable[tuple[str, str | None]], chunk: int = 64
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


def _answer_chunk(
    session: Session, pending: list[tuple[str, str | None]]
) -> list[AskResult | CprError]:
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
    """One question between its search and its record: the set cut at tau, not yet named."""

    text: str
    linked: Linked
    answers: list[Answer]
    best_outside: Answer | None
    relpaths: dict[str, RelPath]

    def described(self) -> list[Answer]:
        return self.answers + ([self.best_outside] if self.best_outside else [])


def _cut(session: Session, text: str, linked: Linked, retrieval: Retrieval) -> Draft:
    """The answers within tau (or the best one outside) with their best paths."""
    cal, tau = session.cal, session.tau
    ranked = retrieval.ranked_answers()
    if ranked and cal.get("centre"):  # the calibration's score: costs minus c x the best
        ranked = [(e, c) for e, c in centred(dict(ranked), cal["centre"]).items()]
    inside = [(e, c) for e, c in ranked if c <= tau]
    relpaths: dict[str, RelPath] = {}

    def answer_at(rank: int, entity_id: str, cost: float) -> Answer:
        relpaths[entity_id], chain, _ = retrieval.witness(entity_id)
        return Answer(entity_id, entity_id, rank, cost, "", chain)

    answers = [answer_at(i + 1, e, c) for i, (e, c) in enumerate(inside)]
    best_outside = answer_at(1, *ranked[0]) if not answers and ranked else None
    return Draft(text, linked, answers, best_outside, relpaths)


def _finish(session: Session, drafts: list[Draft]) -> list[AskResult]:
    """Name, record and report drafted questions: one name lookup and one :Ask write for
    all of them (`session.save`, when set, takes each record and batches them itself)."""
    if not drafts:
        return []
    ids = sorted({e for d in drafts for a in d.described() for e in a.entities})
    names = records.entity_names(session.store, session.dataset, ids) if ids else {}
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
    cal = session.cal
    return {
        "id": uuid.uuid4().hex[:12],
        "dataset": session.dataset,
        "props": {
            "question": d.text,
            "dataset": session.dataset,
            "alpha": session.alpha,
            "delta": session.delta,
            "tau": session.tau,
            "guaranteed": session.no_guarantee is None,
            "n": cal["n"],
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
    cal = session.cal
    notes = list(d.linked.notes) + ([session.no_guarantee] if session.no_guarantee else [])
    url, cypher = browser_link(session.store, ask_id)
    return AskResult(
        d.text,
        session.dataset,
        d.linked.topics,
        session.alpha,
        session.tau,
        cal["n"],
        d.answers,
        d.best_outside,
        ask_id,
        cal["model"],
        cal["id"],
        url,
        cypher,
        notes,
        session.delta,
        None if session.no_guarantee else guarantee_sentence(session.alpha, session.delta),
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
    store: GraphStore,
    text: str,
    alpha: float,
    dataset: str | None = None,
    entity: str | None = None,
    model_id: str | None = None,
    beam_width: int | None = None,
    active: int | None = None,
    hints: HintProvider | None = None,
    hint_beta: float | None = None,
    hops_filter: int | None = None,
    delta: float | None = None,
    all_candidates: bool = False,
    allow_stale: bool = False,
) -> AskResult:
    """One question: `open_session` + `answer`."""
    if not text or not text.strip():  # before loading anything
        raise CprError(EMPTY_QUESTION)
    session = open_session(
        store,
        alpha,
        dataset,
        model_id,
        beam_width,
        active,
        hints,
        hint_beta,
        hops_filter,
        delta,
        all_candidates,
        allow_stale,
    )
    return answer(session, text, entity)
