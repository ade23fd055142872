"""What every question of one `cpr ask` / `cpr serve` request shares: the calibration that
serves it (conformal/guarantee.py decides which), the request's guarantee, the retriever
with its loaded scorer, and the checks that must pass before any answer is given:
settings, scope, graph fingerprint, entity linking and the scorer canary."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cpr_neo4j.conformal.guarantee import (
    DEFAULT_DELTA,
    Calibrated,
    Request,
    request,
    serving,
)
from cpr_neo4j.errors import Conflict, CprError, StaleCalibration
from cpr_neo4j.graph import fingerprint, linking, records
from cpr_neo4j.graph.fingerprint import stale_reason
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.store import scorer_for
from cpr_neo4j.search.hints import HintProvider
from cpr_neo4j.stages import canary
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever, check_scope

# How a message names the options a user can change: CLI flags, or the HTTP request's fields
CLI = {"entity": "--entity", "alpha": "--alpha", "all_candidates": "--all-candidates",
       "allow_stale": "--allow-stale", "hops": "--hops"}  # fmt: skip
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
    cal: dict
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

    def calibrated_for(self, linked: Any) -> Calibrated:
        """The curves that cover this question: the named-topic ones when the user named
        its topics under a text-linked calibration, else the calibration's own."""
        if self.named is not None and getattr(linked.linking, "rule", "") == "named":
            return self.named
        return self.calibrated


_CALIBRATED: dict[str, Calibrated] = {}  # by "id@created": rebuilt once per process
_CANARY_OK: set[tuple[str, int]] = set()  # (calibration key, id(scorer)) already checked


def pick_dataset(store: GraphStore, dataset: str | None, model_id: str | None = None) -> str:
    """The named dataset, else the newest calibrated one (of `model_id`, when named)."""
    found = dataset or records.default_dataset(store, model_id)
    if not found:
        raise CprError("no calibration yet: run `cpr train DATASET` then `cpr calibrate DATASET`")
    return found


def find_calibration(
    store: GraphStore,
    dataset: str,
    model_id: str | None,
    hops: int | None,
    fields: dict | None = None,
) -> dict:
    """The calibration that serves this request (conformal.serving's rules); fields: how
    messages name the request's options (CLI flags when None)."""
    return serving(
        lambda hf: records.latest_calibration(store, dataset, model_id, hf),
        dataset,
        hops,
        model_id,
        fields=fields,
    )


def check_settings(cal: dict, wanted: RetrievalSettings) -> None:
    """Refuse a calibration made with other retrieval or hint settings: no guarantee then."""
    pinned = {k: cal.get(k) for k in PINNED}
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


NAMED = "named_"  # prefix of a text-linked calibration's curves for named topics


def calibrated_of(cal: dict, named: bool = False) -> Calibrated:
    key = f"{cal['id']}@{cal.get('created')}" + (":named" if named else "")
    if key not in _CALIBRATED:
        if len(_CALIBRATED) > 32:
            _CALIBRATED.clear()
        node = {**cal, **{k[len(NAMED) :]: v for k, v in cal.items() if k.startswith(NAMED)}}
        _CALIBRATED[key] = Calibrated.from_node(node if named else cal)
    return _CALIBRATED[key]


def has_named(cal: dict) -> bool:
    return cal.get("linking") == TEXT and f"{NAMED}q_scores" in cal


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
    cal: dict | None = None,
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
    dataset = pick_dataset(store, dataset, model_id)
    cal = cal or find_calibration(store, dataset, model_id, hops_filter, fields)
    req = request(alpha, delta, risk, allow_empty, grouped, effective)
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
        topic_answers=bool(cal.get("topic_answers", False)),
    )
    check_settings(cal, wanted)
    check_scope(cal)  # a new question has no subgraph of its own
    graph = fingerprint.current(store, dataset, cal.get("graph_now"))
    stale = stale_reason(cal.get("graph_fingerprint"), graph) or linker_changed(cal)
    if stale and not allow_stale:
        raise StaleCalibration(
            f"calibration {cal['id']} no longer fits dataset {dataset!r}: {stale}; run "
            f"`cpr calibrate {dataset}` again (or set {fields['allow_stale']} to answer "
            "without a guarantee)"
        )
    calibrated = calibrated_of(cal)
    scorer = scorer_for(cal["model"])  # `cpr serve` lends a loaded one
    key = (f"{cal['id']}@{cal.get('created')}", id(scorer))
    if key not in _CANARY_OK:
        spec = json.loads(cal.get("score_family") or "{}")  # the slack follows its T
        canary.check(scorer, json.loads(cal.get("canary") or "[]"), cal["id"], spec=spec)
        _CANARY_OK.add(key)
    note = (
        f"STALE CALIBRATION, NO GUARANTEE: {stale}; run `cpr calibrate {dataset}`"
        if stale
        else None
    )
    spec = json.loads(cal["score_family"])
    retriever = Retriever(store, dataset, scorer, wanted, hints)
    named = calibrated_of(cal, named=True) if has_named(cal) else None
    return Session(
        store,
        dataset,
        cal,
        calibrated,
        req,
        spec,
        retriever,
        note,
        all_candidates,
        graph=graph,
        fields=fields,
        named=named,
    )


def linker_changed(cal: dict) -> str | None:
    """Why a text-linked calibration no longer describes how this cpr links questions (its
    rules changed since: graph/linking.py LINKER), or None. A calibration of a dataset too
    big for the entity index ("fulltext-..." linking) is compared by the graph alone."""
    made_with = cal.get("linker") or ""
    if cal.get("linking") != TEXT or not made_with.startswith("names-"):
        return None
    if made_with == linking.LINKER:
        return None
    return (
        f"the calibration linked its questions with the linker {made_with}, and this version "
        f"of cpr links them with {linking.LINKER}"
    )


def check_linking(cal: dict, entity: object, field: str = "--entity") -> None:
    """The guarantee covers the linking the calibration used: a gold-linked one covers
    named topics only; a text-linked one covers the question text, and named topics too
    when it stored curves for them (`cpr calibrate` does since they exist)."""
    calibrated = cal.get("linking") or GOLD
    if not entity and calibrated == GOLD:
        raise Conflict(
            f"calibration {cal['id']} used the dataset's gold topic entities, so it covers "
            f"questions whose topic entity is named: give {field} (a name or an id), or run "
            f"`cpr calibrate {cal.get('dataset')} --linking text` to cover linking from the "
            "question text"
        )
    if entity and calibrated == TEXT and not has_named(cal):
        raise Conflict(
            f"calibration {cal['id']} links topic entities from the question text and "
            f"predates the curves for named topics: ask without {field} (the text is "
            f"linked), or run `cpr calibrate {cal.get('dataset')}` again"
        )
