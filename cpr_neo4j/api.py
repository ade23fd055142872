"""The Python API: one `CPR` object over one Neo4j connection does what the `cpr` commands
do (ingest, train, calibrate, ask) and returns typed results.

    from cpr_neo4j import CPR, AskOptions

    with CPR.connect() as cpr:
        r = cpr.ask("which movies did [Ridley Scott] direct", AskOptions(alpha=0.3))
        print(r.guarantee, [a.name for a in r.answers])
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cpr_neo4j.calibration import Calibration
from cpr_neo4j.config import Neo4jSettings
from cpr_neo4j.errors import CprError
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.options import AskOptions

if TYPE_CHECKING:
    from neo4j import Driver

    from cpr_neo4j.graph.ingest import IngestReport
    from cpr_neo4j.hints.base import HintProvider
    from cpr_neo4j.stages.ask import AskResult
    from cpr_neo4j.stages.calibrate import CalibrationResult
    from cpr_neo4j.stages.session import Session
    from cpr_neo4j.stages.train import TrainResult

Question = str | tuple[str, str | list[str] | None]  # a text, or (text, its topic entity)


class CPR:
    """Conformal Path Reasoning over one Neo4j database.

    CPR() / CPR.connect(): the connection `cpr` itself uses (NEO4J_URI, NEO4J_USERNAME,
    NEO4J_PASSWORD, NEO4J_DATABASE, else the local server `cpr neo4j start` runs);
    CPR(driver): a neo4j driver you opened (you close it; `close` leaves it open).
    hints: a relation-hint provider (stages.retrieval.hint_provider) for every ask."""

    def __init__(
        self,
        driver: Driver | None = None,
        *,
        database: str | None = None,
        hints: HintProvider | None = None,
    ):
        if driver is not None:
            self.store = GraphStore.of_driver(driver, database)
        else:
            settings = Neo4jSettings.load()
            self.store = GraphStore(replace(settings, database=database or settings.database))
        self.hints = hints

    @classmethod
    def connect(
        cls,
        uri: str | None = None,
        *,
        user: str | None = None,
        password: str | None = None,
        database: str | None = None,
        hints: HintProvider | None = None,
    ) -> CPR:
        """A connection from the settings (as `cpr` reads them), each given part replacing
        its setting."""
        settings = Neo4jSettings.load()
        given = {"uri": uri, "username": user, "password": password, "database": database}
        changed = {k: v for k, v in given.items() if v is not None}
        if changed:
            settings = replace(settings, **changed, source="CPR.connect's arguments")
        self = cls.__new__(cls)
        self.store, self.hints = GraphStore(settings), hints
        return self

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> CPR:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- loading, training, calibrating ------------------------------------------------

    def ingest(
        self,
        name: str,
        *,
        triples: str | Path | None = None,
        entities: str | Path | None = None,
        questions: str | Path | None = None,
        source: str | Path | None = None,
        strict: bool = False,
        topic_answers: str = "auto",
        batch_size: int = 10_000,
    ) -> IngestReport:
        """`cpr ingest NAME`: a bundled or downloadable dataset (metaqa, webqsp, ...; source:
        its files), or your own graph with `triples` (and `entities`, `questions`)."""
        from cpr_neo4j.graph import ingest as writer
        from cpr_neo4j.loaders.registry import load_dataset
        from cpr_neo4j.loaders.topic_answers import decide
        from cpr_neo4j.loaders.triples import load_triples

        path = lambda p: None if p is None else Path(p)  # noqa: E731
        if triples is not None:
            dataset = load_triples(
                name, Path(triples), path(entities), path(questions), strict=strict
            )
        else:
            dataset = load_dataset(name, path(source), strict=strict)
        dataset, _ = decide(dataset, topic_answers)
        writer.validate_relations(dataset)
        return writer.ingest(self.store, dataset, batch_size=batch_size)

    def train(self, dataset: str, **settings: Any) -> TrainResult:
        """`cpr train DATASET`: settings are stages.train.TrainSettings' fields (hops,
        max_questions, epochs, cal_share, generated, seed, ...)."""
        from cpr_neo4j.stages.train import TrainSettings, train

        return train(self.store, TrainSettings(dataset, **settings))

    def calibrate(
        self,
        dataset: str,
        *,
        model: str | None = None,
        hops: int | None = None,
        delta: float | None = None,
        linking: str = "auto",
        alphas: tuple[float, ...] | None = None,
    ) -> CalibrationResult:
        """`cpr calibrate DATASET`: the newest model of the dataset unless `model`; hops:
        a calibration for N-hop questions; delta: the PAC level (default 0.05)."""
        from cpr_neo4j.conformal import DEFAULT_DELTA
        from cpr_neo4j.stages.calibrate import DEFAULT_ALPHAS, calibrate

        return calibrate(
            self.store,
            dataset,
            model,
            alphas=alphas or DEFAULT_ALPHAS,
            hints=self.hints,
            hops_filter=hops,
            delta=DEFAULT_DELTA if delta is None else (delta or None),
            linking=linking,
        )

    def calibration(
        self, dataset: str | None = None, *, model: str | None = None, hops: int | None = None
    ) -> Calibration:
        """The calibration an ask of `dataset` (default: the one `cpr ask` answers from)
        with this model and hop count is served by; id "none" when the dataset has none."""
        from cpr_neo4j.stages.session import find_calibration, pick_dataset

        name, _ = pick_dataset(self.store, dataset, model)
        return find_calibration(self.store, name, model, hops)

    # -- asking ------------------------------------------------------------------------

    def session(self, options: AskOptions | None = None, **changes: Any) -> Session:
        """The checks every question of these options shares, done once (for many asks)."""
        return _options(options, changes).open(self.store, self.hints, fields=_fields())

    def ask(self, question: str, options: AskOptions | None = None, **changes: Any) -> AskResult:
        """One question's answer set, its paths and its guarantee, recorded as an (:Ask).
        options: AskOptions; changes: fields replaced in them (`cpr.ask(q, alpha=0.2)`).
        Raises a CprError (Unattainable, Conflict, StaleCalibration, ...) saying why not."""
        from cpr_neo4j.errors import EMPTY_QUESTION
        from cpr_neo4j.stages.ask import answer

        if not question or not question.strip():
            raise CprError(EMPTY_QUESTION)
        opts = _options(options, changes)
        return answer(opts.open(self.store, self.hints, fields=_fields()), question, opts.entities)

    def ask_many(
        self, questions: Iterable[Question], options: AskOptions | None = None, **changes: Any
    ) -> Iterator[AskResult | CprError]:
        """Many questions under one session, in order: each an AskResult, or the CprError
        that question alone raised. A question is a text (its topic linked, or the options'
        entity) or a (text, entity) pair. Batched: one search round trip per hop per 64."""
        from cpr_neo4j.stages.ask import ask_many

        opts = _options(options, changes)
        session = opts.open(self.store, self.hints, fields=_fields())
        pairs = (q if isinstance(q, tuple) else (q, opts.entities) for q in questions)
        return ask_many(session, pairs)


def _fields() -> dict[str, str]:
    """How error messages name the options a caller can change (the CLI names its flags)."""
    from cpr_neo4j.stages.session import CLI

    return {k: f"AskOptions.{k}" for k in CLI}


def _options(options: AskOptions | None, changes: dict[str, Any]) -> AskOptions:
    base = options or AskOptions()
    return replace(base, **changes) if changes else base
