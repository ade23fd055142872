"""What every question of one `cpr ask` / `cpr serve` request shares: the calibration that
serves it (conformal/guarantee.py decides which), the request's guarantee, the retriever
with its loaded scorer, and the checks that must pass before any answer is given:
settings, scope, graph fingerprint, entity linking and the scorer canary."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cpr_neo4j.calibration import NAMED, UNCALIBRATED, Calibration
from cpr_neo4j.config import cpr_home
from cpr_neo4j.conformal.guarantee import (
    DEFAULT_DELTA,
    Calibrated,
    Request,
    request,
    serving,
)
from cpr_neo4j.errors import Conflict, CprError, StaleCalibration
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.graph.fingerprint import stale_reason
from cpr_neo4j.graph.neighbours import DEFAULT_FANOUT_CAP
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.hints.base import HintProvider
from cpr_neo4j.model.encoder import shared_encoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.model.store import model_dir, read_config, save_scorer, scorer_for
from cpr_neo4j.stages import canary, pins
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever, check_scope
from cpr_neo4j.stages.scoring import default_spec

# How a message names the options a user can change: CLI flags, or the HTTP request's fields
CLI = {"entity": "--entity", "alpha": "--alpha", "all_candidates": "--all-candidates",
       "allow_stale": "--allow-stale", "hops": "--hops", "model": "--model",
       "dataset": "--dataset"}  # fmt: skip
HTTP = {k: f"the `{k}` field" for k in CLI}
GOLD, TEXT = "gold", "text"  # as stages.calibrate (not imported: it pulls in training)
PINNED = (
    "hops",
    "beam_width",
    "active",
    "fanout_cap",
    "hint_mode",
    "hint_beta",
    "hint_prompt",
    "topic_answers",
)


@dataclass
class Session:
    store: GraphStore
    dataset: str
    cal: Calibration
    calibrated: Calibrated
    request: Request
    spec: dict  # the calibration's score family
    retriever: Retriever
    no_guarantee: str | None  # a STALE note when no guarantee holds
    all_candidates: bool = False  # an unattainable alpha answers with every candidate
    # Writes an :Ask record; `cpr serve` passes one that commits concurrent asks together.
    save: Callable[[dict], None] | None = None
    graph: str = ""  # the dataset's fingerprint when the session opened
    fields: dict = field(default_factory=lambda: CLI)  # how messages name options (HTTP)
    # a text-linked calibration's curves for questions whose topics the user names
    named: Calibrated | None = None
    chosen: str = ""  # why this dataset answers when the request named none

    @property
    def uncalibrated(self) -> bool:
        """No calibration: ranked candidates without a guarantee (find_calibration)."""
        return self.cal.uncalibrated

    def calibrated_for(self, linked: Any) -> Calibrated:
        """The curves that cover this question: the named-topic ones when the user named
        its topics under a text-linked calibration, else the calibration's own."""
        if self.named is not None and getattr(linked.linking, "rule", "") == "named":
            return self.named
        return self.calibrated


_CALIBRATED: dict[str, Calibrated] = {}  # by "id@created": rebuilt once per process
_CANARY_OK: set[tuple[str, int]] = set()  # (calibration key, id(scorer)) already checked


DATASET_ENV = "CPR_DATASET"  # the dataset `cpr ask` / `cpr serve` answer when none is named
DEFAULT_FILE = "dataset"  # under CPR_HOME: the one `cpr use NAME` set


def default_choice() -> tuple[str | None, str]:
    """(the user's default dataset, where it was set): CPR_DATASET, else `cpr use`'s file."""
    if os.environ.get(DATASET_ENV):
        return os.environ[DATASET_ENV], DATASET_ENV
    path = cpr_home() / DEFAULT_FILE
    try:
        name = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None, ""
    return (name, f"`cpr use` ({path})") if name else (None, "")


def pick_dataset(
    store: GraphStore, dataset: str | None, model_id: str | None = None
) -> tuple[str, str]:
    """(dataset, why it answers): the named one; else the user's default (CPR_DATASET or
    `cpr use`); else the newest calibrated one (of `model_id`, when named); else the newest
    ingested one (answered without a guarantee)."""
    if dataset:
        return dataset, ""
    chosen, where = default_choice()
    if chosen:
        return chosen, f"the default set by {where}"
    found = records.default_dataset(store, model_id)
    if found:
        return found, "the most recently calibrated"
    ingested = [d.name for d in records.datasets(store) if d.complete]
    if not ingested:
        raise CprError(
            "no dataset in Neo4j yet: load a graph with `cpr ingest NAME --triples FILE`, "
            "`cpr ingest NAME --from-neo4j` (a graph already in this database) or `cpr "
            "ingest metaqa` (a benchmark)"
        )
    return ingested[0], "the most recently ingested (none is calibrated)"


def find_calibration(
    store: GraphStore,
    dataset: str,
    model_id: str | None,
    hops: int | None,
    fields: dict | None = None,
) -> Calibration:
    """The calibration that serves this request (conformal.serving's rules); fields: how
    messages name the request's options (CLI flags when None). A dataset with no
    calibration at all (of `model_id`, when named) is answered without a guarantee: its
    stand-in (`uncalibrated`) says so."""
    try:
        node = serving(
            lambda hf: records.latest_calibration(store, dataset, model_id, hf),
            dataset,
            hops,
            model_id,
            fields=fields,
        )
        return Calibration.of(node)
    except CprError:
        if records.latest_calibration(store, dataset, model_id, None) is not None:
            raise  # calibrated, but not for this request: serving's message says how
    return uncalibrated(store, dataset, model_id, hops, fields or CLI)


DEFAULT_DEPTH = 2  # search depth without questions or a model (as training.questions')


def uncalibrated(
    store: GraphStore, dataset: str, model_id: str | None, hops: int | None, fields: dict
) -> Calibration:
    """What stands in for a calibration on a dataset without one: the newest CPR model
    trained on it (`model_id` when named), else the semantic scorer V_sem (Abl.1, saved so
    that every process loads it by id); the dataset's next step for a guarantee."""
    info = records.require_dataset(store, dataset)  # unknown: the known ones listed
    node = _model_of(store, dataset, model_id, fields)
    labelled = records.question_splits(store, dataset)
    if node is not None:
        meta = read_config(node["id"])["meta"]
        model, depth = node["id"], int(meta["hops"])
        spec = default_spec(meta["temperature"]) if meta.get("temperature") else BEST_PATH
        kind = f"model {model}, trained on {dataset!r}"
        if meta.get("calibration_ids"):  # it set labelled questions aside: calibrate them
            step = f"`cpr calibrate {dataset}" + (f" --model {model}`" if model_id else "`")
        elif labelled:  # labels came after it: training splits them off first
            step = f"`cpr train {dataset}` then `cpr calibrate {dataset}`"
        else:
            step = f"label questions: {records.label_steps(dataset)}"
    else:
        scorer = PathScorer(shared_encoder(), records.relation_text(store, dataset))
        model = scorer.model_id
        if not (model_dir(model) / "config.json").exists():
            save_scorer(scorer, {"dataset": dataset, "kind": "V_sem (Abl.1), untrained"})
        most = max((s["max_hops"] or 0 for s in labelled.values()), default=0)
        depth, spec = hops or int(most) or DEFAULT_DEPTH, BEST_PATH
        kind = f"the semantic scorer V_sem ({model}, untrained)"
        step = (
            f"`cpr train {dataset}` then `cpr calibrate {dataset}`"
            if labelled
            else f"`cpr train {dataset}` ranks better (questions generated from the graph, "
            f"still no guarantee); for a guarantee, label questions: "
            f"{records.label_steps(dataset)}"
        )
    return Calibration(
        id=UNCALIBRATED,
        uncalibrated=True,
        model=model,
        scorer=kind,
        next_step=step,
        dataset=dataset,
        n=0,
        hops=depth,
        question_hops=None,
        delta=None,
        recall=math.nan,
        scope="graph",
        beam_width=32,
        active=32,
        fanout_cap=DEFAULT_FANOUT_CAP,
        hint_beta=0.0,
        topic_answers=bool(info.get("topic_answers")),
        score_family=spec,
        linking=TEXT,
    )


BEST_PATH = {"family": "centred", "centre": 0.0}  # an answer's best path's cost: no parameter


def _model_of(store: GraphStore, dataset: str, model_id: str | None, fields: dict) -> dict | None:
    """The model node that answers a dataset without calibration: `model_id` (checked:
    it exists and was trained on `dataset`), else the newest CPR model of `dataset` saved
    under this CPR_HOME, else None (the semantic scorer)."""
    if model_id is None:
        for mid in records.dataset_models(store, dataset, negatives="puct"):
            if (model_dir(mid) / "config.json").exists():
                return records.model_node(store, mid)
        return None
    node = records.model_node(store, model_id)
    option = fields.get("model", "--model")
    if node is None:
        mine = records.dataset_models(store, dataset)
        listed = f"; models of {dataset!r}: {', '.join(mine)}" if mine else ""
        raise CprError(
            f"no scoring model {model_id!r} in Neo4j{listed}: ask without {option} (the "
            f"newest model of {dataset!r}, else the semantic scorer, answers)"
        )
    if node.get("dataset") != dataset:
        raise CprError(
            f"model {model_id} was trained on dataset {node.get('dataset')!r}, not {dataset!r}:"
            f" ask {node.get('dataset')!r} with it, or ask {dataset!r} without {option}"
        )
    return node


def check_settings(cal: Calibration, wanted: RetrievalSettings) -> None:
    """Refuse a calibration made with other retrieval or hint settings: no guarantee then."""
    pinned = {k: cal.pinned(k) for k in PINNED}
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


def calibrated_of(cal: Calibration, named: bool = False) -> Calibrated:
    """The calibration's curves (the named-topic ones when `named`), built once a process."""
    key = cal.key + (":named" if named else "")
    if key not in _CALIBRATED:
        if len(_CALIBRATED) > 32:
            _CALIBRATED.clear()
        node = cal.node
        if named:
            node = {**node, **{k[len(NAMED) :]: v for k, v in node.items() if k.startswith(NAMED)}}
        _CALIBRATED[key] = Calibrated.from_node(node)
    return _CALIBRATED[key]


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
    delta: float | None = DEFAULT_DELTA,
    all_candidates: bool = False,
    allow_stale: bool = False,
    cal: Calibration | None = None,
    risk: str = "coverage",
    allow_empty: bool = False,
    grouped: bool = True,
    fields: dict | None = None,
    effective: bool | None = None,
) -> Session:
    """Check the request against the calibration that serves it (`cal`: already read by
    the caller); errors before any search. delta 0 or None: the marginal guarantee.
    fields: how messages name the options (CLI flags by default; HTTP for `cpr serve`)."""
    fields = fields or CLI
    dataset, chosen = pick_dataset(store, dataset, model_id)
    cal = cal or find_calibration(store, dataset, model_id, hops_filter, fields)
    req = request(alpha, delta, risk, allow_empty, grouped, effective)
    mode = hints.mode if hints is not None and hints.mode != "none" else "none"
    wanted = RetrievalSettings(
        hops=cal.hops,
        beam_width=beam_width or cal.beam_width,
        active=active or cal.active,
        fanout_cap=cal.fanout_cap,
        hint_mode=mode,
        hint_beta=(hint_beta if hint_beta is not None else cal.hint_beta)
        if mode != "none"
        else 0.0,
        hint_prompt=hints.prompt if hints is not None and mode != "none" else "",
        topic_answers=cal.topic_answers,
    )
    if cal.uncalibrated:  # ranked candidates, said to carry no guarantee
        return Session(
            store=store,
            dataset=dataset,
            cal=cal,
            calibrated=Calibrated([], [], {"qidx": [], "score": [], "n_gold": []}, {"n": 0}),
            request=req,
            spec=cal.score_family,
            retriever=Retriever(store, dataset, scorer_for(cal.model), wanted, hints),
            no_guarantee=None,
            all_candidates=True,
            graph=fingerprint.current(store, dataset),
            fields=fields,
            chosen=chosen,
        )
    check_settings(cal, wanted)
    check_scope(cal)  # a new question has no subgraph of its own
    graph = fingerprint.current(store, dataset, cal.graph_now)
    # the graph, and the code's rules (linker, ties, candidates, groups, cuts): all said
    reasons = (stale_reason(cal.graph_fingerprint, graph), pins.changed(cal))
    stale = "; ".join(r for r in reasons if r) or None
    if stale and not allow_stale:
        raise StaleCalibration(
            f"calibration {cal.id} no longer fits dataset {dataset!r}: {stale}; run "
            f"`cpr calibrate {dataset}` again (or set {fields['allow_stale']} to answer "
            "without a guarantee)"
        )
    calibrated = calibrated_of(cal)
    scorer = scorer_for(cal.model)  # `cpr serve` lends a loaded one
    key = (cal.key, id(scorer))
    if key not in _CANARY_OK:  # the slack follows the score family's T
        canary.check(
            scorer, list(cal.canary), cal.id, cal.tolerance, cal.score_family, remember=cal.key
        )
        _CANARY_OK.add(key)
    note = (
        f"STALE CALIBRATION, NO GUARANTEE: {stale}; run `cpr calibrate {dataset}`"
        if stale
        else None
    )
    retriever = Retriever(store, dataset, scorer, wanted, hints)
    named = calibrated_of(cal, named=True) if cal.named else None
    return Session(
        store=store,
        dataset=dataset,
        cal=cal,
        calibrated=calibrated,
        request=req,
        spec=cal.score_family,
        retriever=retriever,
        no_guarantee=note,
        all_candidates=all_candidates,
        graph=graph,
        fields=fields,
        named=named,
        chosen=chosen,
    )


def check_linking(cal: Calibration, entity: object, field: str = "--entity") -> None:
    """The guarantee covers the linking the calibration used: a gold-linked one covers
    named topics only; a text-linked one covers the question text, and named topics too
    when it stored curves for them (`cpr calibrate` does since they exist)."""
    if not entity and cal.linking == GOLD:
        raise Conflict(
            f"calibration {cal.id} used the dataset's gold topic entities, so it covers "
            f"questions whose topic entity is named: give {field} (a name or an id), or run "
            f"`cpr calibrate {cal.dataset} --linking text` to cover linking from the "
            "question text"
        )
    if entity and cal.linking == TEXT and not cal.named:
        raise Conflict(
            f"calibration {cal.id} links topic entities from the question text and "
            f"predates the curves for named topics: ask without {field} (the text is "
            f"linked), or run `cpr calibrate {cal.dataset}` again"
        )
