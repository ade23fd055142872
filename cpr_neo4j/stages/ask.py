"""`cpr ask`: link entities, run TreeG with the calibrated scorer, cut at the question's
threshold (conformal/guarantee.py), record an :Ask (graph/records.py `save_asks`) with its
paths in words and the Browser link that draws it."""

from __future__ import annotations

import itertools
import json
import math
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from cpr_neo4j.calibration import Calibration
from cpr_neo4j.config import local_server_settings
from cpr_neo4j.conformal.guarantee import Threshold, cut_set
from cpr_neo4j.conformal.mondrian import group_floor
from cpr_neo4j.conformal.threshold import min_questions, percent
from cpr_neo4j.errors import EMPTY_QUESTION, CprError, Unattainable
from cpr_neo4j.graph import entity_index, records
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.linking.readings import Linked, choose, link_text
from cpr_neo4j.neo4j_server.browser import ask_link, ask_query
from cpr_neo4j.search.adjacency_cache import ANSWER_CACHE_ENTITIES, CachedAdjacency
from cpr_neo4j.search.base import RelPath
from cpr_neo4j.search.treeg import Retrieval
from cpr_neo4j.stages.retrieval import Retriever
from cpr_neo4j.stages.scoring import answer_scores, columns
from cpr_neo4j.stages.session import TEXT, Session, check_linking, open_session
from cpr_neo4j.text import cvt_label, is_mid


@dataclass(kw_only=True)  # built by keyword: many fields
class Answer:
    id: str
    name: str
    rank: int
    cost: float  # the answer's score under the calibration's family, cut at the threshold
    path: str  # the best path, entity names and relation arrows
    entities: list[str]  # entity ids along the best path, topic first
    entity_names: list[str] = field(default_factory=list)  # their names, in the same order


@dataclass(kw_only=True)  # built by keyword: many fields
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
    linking: dict = field(default_factory=dict)  # the linker's candidates, choice and rule


Entity = str | Sequence[str] | None  # --entity, possibly repeated


def link_question(session: Session, text: str, entity: Entity) -> Linked:
    """Topic entities of one question, linked the way its calibration was; a question
    whose names tie carries one choice per reading, for `search` to decide."""
    if not text or not text.strip():
        raise CprError(EMPTY_QUESTION)
    option = session.fields["entity"]
    if not session.uncalibrated:  # no calibration: no linking of its to keep to
        check_linking(session.cal, entity, option)
    return link_text(session.store, session.dataset, text, entity, session.graph, option)


def search(session: Session, text: str, linked: Linked) -> tuple[Linked, Retrieval]:
    """TreeG from each of the question's readings; the best-scoring one is taken."""
    run = session.retriever.run  # it names only the answers it shows (defer_names)
    if len(linked.choices) == 1:
        return linked, run(linked.masked, _topic_ids(linked), text, defer_names=True)
    found: list = []  # one search per reading (`cpr serve` batches each with others)
    for ids, m in linked.choices:
        try:
            found.append(run(m, ids, text, defer_names=True))
        except CprError as exc:
            found.append(exc)
    i, chosen = choose(linked, found, session.fields["entity"])
    if isinstance(found[i], CprError):
        raise found[i]
    return chosen, found[i]


def answer(
    session: Session, text: str, entity: Entity = None, linked: Linked | None = None
) -> AskResult:
    """One question under an open session: link, search, cut, record an :Ask."""
    linked, retrieval = search(session, text, linked or link_question(session, text, entity))
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
    session.retriever.scorer.questions([m for x in linked.values() for _, m in x.choices])
    # every reading of every question in one lockstep search; ties decided per question
    jobs = [(i, ids, m) for i, x in linked.items() for ids, m in x.choices]
    found = session.retriever.run_many([(m, ids, pending[i][0], None) for i, ids, m in jobs])
    per_q: dict[int, list] = {}
    for (i, _, _), r in zip(jobs, found, strict=True):
        per_q.setdefault(i, []).append(r)
    drafts: dict[int, Draft] = {}
    for i in list(linked):
        k, linked[i] = choose(linked[i], per_q[i], session.fields["entity"])
        retrieval = per_q[i][k]
        x = linked[i]
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


def form_note(cal: Calibration, linked: Linked) -> list[str]:
    """A note when the question names its topic unlike the calibration questions did: the
    guarantee measured that linking on questions written the calibration's way."""
    share, rule = cal.bracketed, getattr(linked.linking, "rule", "")
    if cal.linking != TEXT or share is None or rule == "named":
        return []
    if rule == "bracketed" and share < 0.5:
        return [f"the calibration's questions were plain text ({1 - share:.0%}); this one names "
                "its topic in [brackets], which they did not"]  # fmt: skip
    if rule != "bracketed" and share >= 0.5:
        return [f"the calibration's questions named their topics in [brackets] ({share:.0%}); "
                f"this one is linked from plain words, which its guarantee did not measure: "
                f"calibrate a plain-text dataset for such questions (e.g. `cpr ingest "
                f"metaqa-plain`)"]  # fmt: skip
    return []


def no_guarantee(session: Session) -> str:
    """Why an answer on a dataset without calibration promises nothing, and what gets a
    guarantee: how many labelled questions (threshold.min_questions: the PAC rule the
    thresholds use; training/labels.py: how `cpr train` reserves labels for calibration)
    and the dataset's next command."""
    from cpr_neo4j.training.labels import CAL_FLOOR, CAL_SHARE, calibration_count

    req, cal = session.request, session.cal
    n = min_questions(req.alpha, req.pac)
    per_group = group_floor(req.alpha, req.pac)
    labelled = n if calibration_count(n, None) >= n else math.floor(n / CAL_SHARE)
    while calibration_count(labelled, None) < n:  # the rule rounds: step to the first
        labelled += 1
    at = f"alpha={req.alpha:g}" + (f", delta={req.pac:g}" if req.pac else "")
    return (
        f"dataset {session.dataset!r} has no calibration, so these are every candidate ranked "
        f"by {cal.scorer}, with no promise that a right answer is among them. A guarantee "
        f"at {at} needs at least {n} labelled calibration questions whose answer the graph "
        f"reaches ({per_group} per group for a threshold of each hop count's own)"
        + (
            f"; `cpr train` keeps 10% of the labels for calibration past {CAL_FLOOR}, so about "
            f"{labelled} labelled questions"
            if labelled > n
            else ""
        )
        + f"; next: {cal.next_step}"
    )


def _topic_ids(linked: Linked) -> list[str]:
    return [t["id"] for t in linked.topics]


@dataclass(kw_only=True)  # built by keyword: many fields
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
    req, info = session.request, session.cal
    cols = columns(retrieval, session.spec, info.topic_answers)
    scores = answer_scores(cols, session.spec)
    calibrated = session.calibrated_for(linked)
    notes = form_note(info, linked)
    if session.uncalibrated:  # every candidate, ranked; no threshold to cut at
        why = no_guarantee(session)
        th = Threshold(value=math.inf, why=why, group=int(cols.group), pool="none", n=0)
        notes.append(f"NO GUARANTEE: {why}")
    else:
        th = calibrated.threshold(req, cols.group)
    if not th.attainable and not session.uncalibrated:
        if not session.all_candidates:
            raise Unattainable(
                f"alpha={req.alpha:g} cannot be honoured by calibration {info.id} of "
                f"{session.dataset!r}: "
                f"{th.why}; ask with a larger {session.fields['alpha']}, or set "
                f"{session.fields['all_candidates']} for every "
                "candidate without a guarantee"
            )
        notes.append(
            f"NO GUARANTEE: {th.why}; the set is every candidate, which holds a correct "
            f"answer for only about {percent(info.recall)} of questions "
            f"(the calibration's retrieval recall), not {percent(1 - req.alpha)}"
        )
    inside = cut_set(scores, th, req, info.tolerance)  # the calibration's own
    relpaths: dict[str, RelPath] = {}

    def answer_at(rank: int, k: int) -> Answer:
        entity = cols.id_at(k)
        node = None if cols.nodes is None else int(cols.nodes[k])
        relpaths[entity], chain, _ = retrieval.witness(entity, node)
        return Answer(
            id=entity, name=entity, rank=rank, cost=float(scores[k]), path="", entities=chain
        )

    kept = cols.ordered(np.flatnonzero(inside), scores).tolist()  # by (score, cost, id)
    answers = [answer_at(i + 1, k) for i, k in enumerate(kept)]
    best_outside = None
    if not answers and len(scores):  # the top-ranked answer, among those of the best score
        first = int(np.lexsort((np.arange(len(scores)), scores))[0])
        tied = np.flatnonzero(scores == scores[first]) if np.isfinite(scores[first]) else [first]
        best_outside = answer_at(1, int(cols.ordered(tied, scores)[0]))
    guaranteed = th.attainable and session.no_guarantee is None
    return Draft(
        text=text,
        linked=linked,
        answers=answers,
        best_outside=best_outside,
        relpaths=relpaths,
        threshold=th,
        guaranteed=guaranteed,
        notes=notes,
    )


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
    asks = [ask_record(session, d, names) for d in drafts]
    if session.save is not None:
        for record in asks:
            session.save(record)
    else:
        records.save_asks(session.store, asks)  # one transaction
    return [_result(session, d, record["id"]) for d, record in zip(drafts, asks, strict=True)]


MAX_PATHS_RECORDED = 50  # answers whose best path is linked on the :Ask node (Browser view)


def describe(relpath: RelPath, chain: list[str], names: dict[str, str]) -> str:
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


def ask_record(session: Session, d: Draft, names: dict[str, str | None] | None = None) -> dict:
    """The (:Ask) record of one drafted question (graph/records.py `save_asks`); names:
    the path entities' names as looked up for the answer (None: none known)."""
    info, req = session.cal, session.request
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
            "model_id": info.model,
            "calibration_id": info.id,
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


def mediators(answers: list[Answer], names: dict[str, str | None]) -> list[str]:
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


def _hops(a: Answer, relpath: RelPath) -> dict:
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


# What a promise for a named topic rests on: the curves searched from the calibration
# questions' true topics, named as a user names them (linking/named.py).
NAMED_ASSUMES = (
    "this assumes the named entity is the question's true topic: the calibration named "
    "each question's own topic, so a wrong name is not covered"
)


def _result(session: Session, d: Draft, ask_id: str) -> AskResult:
    info, req = session.cal, session.request
    notes = (
        list(d.linked.notes) + d.notes + ([session.no_guarantee] if session.no_guarantee else [])
    )
    url, cypher = browser_link(session.store, ask_id)
    calibrated = session.calibrated_for(d.linked)
    sentence = calibrated.sentence(req, d.threshold) if d.guaranteed else None
    if sentence and getattr(d.linked.linking, "rule", "") == "named":
        sentence += f"; {NAMED_ASSUMES}"
    caveat = calibrated.caveat(req, d.threshold) if d.guaranteed else None
    if caveat:  # a fallback threshold: say what the guarantee is not, next to the notes
        notes.append(f"fallback threshold: {caveat}")
    return AskResult(
        question=d.text,
        dataset=session.dataset,
        topics=d.linked.topics,
        alpha=req.alpha,
        tau=d.threshold.value,
        n=d.threshold.n,
        answers=d.answers,
        best_outside=d.best_outside,
        ask_id=ask_id,
        model_id=info.model,
        calibration_id=info.id,
        browser_url=url,
        cypher=cypher,
        notes=notes,
        delta=req.pac,
        guarantee=sentence,
        risk=req.risk,
        group=d.threshold.group,
        allow_empty=req.allow_empty,
        linking=d.linked.record(),
    )


def ask(
    store: GraphStore, text: str, alpha: float, *, entity: Entity = None, **options
) -> AskResult:
    """One question: `open_session(store, alpha, **options)` + `answer`."""
    if not text or not text.strip():  # before loading anything
        raise CprError(EMPTY_QUESTION)
    return answer(open_session(store, alpha, **options), text, entity)
