"""Per-question subgraphs (`--scope`): IN_SUBGRAPH membership written by ingest, retrieval
(TreeG and the PUCT neighbour source) confined to a question's own subgraph under
`--scope subgraph` and over the union under `--scope graph`, and the scope pinned on the
calibration. Real Neo4j; a small Freebase-shaped graph with CVT nodes."""

from __future__ import annotations

import polars as pl
import pytest

from cpr_neo4j.errors import BadInput, Conflict
from cpr_neo4j.graph import records
from cpr_neo4j.graph.ingest import ingest
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.subgraphs import GRAPH, SUBGRAPH, has_subgraphs, resolve_scope
from cpr_neo4j.loaders.base import build_dataset, questions_frame
from cpr_neo4j.search.treeg import retrieve
from tests.conftest import drop_dataset, drop_models
from tests.test_treeg import TableScorer

pytestmark = pytest.mark.neo4j

NAME = "scope_test"
N = 40  # questions; q0 and q1 (like every question) share the studio hub
CAST, ACTOR, STUDIO = (
    "tv.tv_program.regular_cast",
    "tv.regular_tv_appearance.actor",
    "tv.show.studio",
)


def _dataset():
    """Question i: `who acts in [Show i]`; Show i -regular_cast-> CVT c.i -actor-> Actor i.
    Every show has the same studio (the shared entity); each question's subgraph is its
    show, CVT, actor and the studio, so under --scope graph the studio leads to the others."""
    triples, members, q = [], [], []
    for i in range(N):
        show, cvt, actor = f"m.show{i}", f"m.c{i}", f"m.actor{i}"
        triples += [(show, CAST, cvt), (cvt, ACTOR, actor), (show, STUDIO, "m.studio")]
        members += [(f"q{i}", e) for e in (show, cvt, actor, "m.studio")]
        q.append(
            {
                "id": f"q{i}",
                "text": f"who acts in [Show {i}]",
                "split": "train",
                "hops": 2,
                "topics": [show],
                "answers": [actor],
                "_file": "mem",
                "_line": i + 1,
            }
        )
    names = [(f"m.show{i}", f"Show {i}") for i in range(N)]
    names += [(f"m.actor{i}", f"Actor {i}") for i in range(N)] + [("m.studio", "Studio")]
    return build_dataset(
        NAME,
        "memory",
        pl.DataFrame(triples, schema=["head", "relation", "tail"], orient="row"),
        questions_frame(q),
        [],
        names=pl.DataFrame(names, schema=["id", "name"], orient="row"),
        subgraphs=pl.DataFrame(members, schema=["question", "entity"], orient="row"),
    )


@pytest.fixture(scope="module")
def scoped(store):
    drop_dataset(store, NAME)
    ds = _dataset()
    first = ingest(store, ds)
    yield ds, first
    drop_dataset(store, NAME)


def _members(store, qid: str) -> set[str]:
    rows = store.query(
        "MATCH (:Question {dataset: $d, id: $q})-[:IN_SUBGRAPH]->(e:Entity) RETURN e.id AS id",
        {"d": NAME, "q": qid},
    )[0]
    return {r["id"] for r in rows}


def test_ingest_writes_membership_once(store, scoped):
    ds, first = scoped
    assert first.stages["subgraphs"] == 4 * N
    assert _members(store, "q0") == {"m.show0", "m.c0", "m.actor0", "m.studio"}
    assert has_subgraphs(store, NAME)
    again = ingest(store, ds)
    assert again.created_relationships == 0 and again.created_nodes == 0
    assert resolve_scope(store, NAME, None) == SUBGRAPH  # the default where membership exists


def test_scope_subgraph_needs_membership(store, metaqa):
    assert resolve_scope(store, "metaqa", None) == GRAPH
    with pytest.raises(BadInput, match="no per-question subgraphs"):
        resolve_scope(store, "metaqa", SUBGRAPH)


def test_neighbours_see_only_the_question_subgraph(store, scoped):
    whole = Neo4jNeighbours(store, NAME).neighbours(["m.studio"])["m.studio"]
    assert len(whole) == N  # every show, through ~studio
    for qid, show in (("q0", "m.show0"), ("q1", "m.show1")):
        src = Neo4jNeighbours(store, NAME, question=qid)
        assert [e for _, e in src.neighbours(["m.studio"])["m.studio"]] == [show]
        assert src.neighbours(["m.show5"]) == {}  # not a member: invisible
        assert src.round_trips == 2  # still one query per call


def test_treeg_scope(store, scoped):
    costs = {(CAST,): 0.0, (CAST, ACTOR): 0.1, (STUDIO,): 0.5, (STUDIO, f"~{STUDIO}"): 0.6}
    for qid, i in (("q0", 0), ("q1", 1)):
        own = retrieve(
            Neo4jNeighbours(store, NAME, question=qid),
            TableScorer(costs),
            None,
            [f"m.show{i}"],
            2,
        )
        ends = set(own.answer_costs())
        assert ends <= _members(store, qid) and f"m.actor{i}" in ends
        assert own.round_trips == 2
        union = retrieve(Neo4jNeighbours(store, NAME), TableScorer(costs), None, [f"m.show{i}"], 2)
        other = f"m.show{1 - i}"
        assert other in union.answer_costs() and other not in ends  # via the shared studio


def test_puct_source_sees_only_the_question_subgraph(store, scoped):
    from cpr_neo4j.model.encoder import TextEncoder
    from cpr_neo4j.model.scorer import PathScorer
    from cpr_neo4j.stages.train import TrainSettings, collect
    from cpr_neo4j.training import questions as qsel
    from cpr_neo4j.training.puct import RelationPriors

    qs = qsel.load(store, NAME, "train", None, {"q0", "q1"})
    vsem = PathScorer(TextEncoder(), records.relation_text(store, NAME))
    s = TrainSettings(NAME, rollouts=8)
    seen: dict[str, set[str]] = {}
    for scope in (SUBGRAPH, GRAPH):
        pairs, _ = collect(store, s, vsem, RelationPriors(), qs, 2, lambda: None, scope)
        assert pairs
        seen[scope] = {e for p in pairs for path in (p.pos, p.neg) for e in path.nodes}
        if scope == SUBGRAPH:
            for p in pairs:
                own = _members(store, str(p.question_id))
                assert set(p.pos.nodes) | set(p.neg.nodes) <= own
    assert seen[GRAPH] - seen[SUBGRAPH]  # the union offers other questions' shows


@pytest.fixture(scope="module")
def calibrated(store, scoped, tmp_path_factory):
    from cpr_neo4j.stages.calibrate import GOLD, calibrate
    from cpr_neo4j.stages.train import TrainSettings, train

    model = None
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CPR_HOME", str(tmp_path_factory.mktemp("cpr_home_scope")))
        try:
            model = train(store, TrainSettings(NAME, max_questions=20, cal_share=0.3, rollouts=8))
            sub = calibrate(store, NAME, model.model_id, alphas=(0.5,), linking=GOLD)
            yield model.model_id, sub
        finally:
            if model is not None:
                drop_models(store, [model.model_id])


def test_scope_is_recorded_and_checked(store, calibrated):
    from cpr_neo4j.stages.ask import ask
    from cpr_neo4j.stages.calibrate import GOLD, calibrate

    model_id, sub = calibrated
    assert records.model_node(store, model_id)["scope"] == SUBGRAPH
    assert sub.scope == SUBGRAPH and sub.recall == 1.0
    cal = records.latest_calibration(store, NAME, model_id)
    assert cal["scope"] == SUBGRAPH
    with pytest.raises(Conflict, match="--scope graph"):
        ask(store, "who acts in [Show 3]", 0.5, dataset=NAME, entity="m.show3", model_id=model_id)
    whole = calibrate(store, NAME, model_id, alphas=(0.5,), linking=GOLD, scope=GRAPH)
    assert whole.id != sub.id and whole.scope == GRAPH
    got = ask(
        store, "who acts in [Show 3]", 0.5, entity="m.show3", dataset=NAME, model_id=model_id,
        all_candidates=True,
    )  # fmt: skip
    assert records.latest_calibration(store, NAME, model_id)["scope"] == GRAPH
    path = {a.id: a.path for a in got.answers}["m.actor3"]
    # the CVT between the two steps reads as its Freebase type, not a bare MID
    assert path == f"Show 3 -{CAST}-> [regular tv appearance] -{ACTOR}-> Actor 3"
