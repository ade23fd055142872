"""The path costs `cpr calibrate` keeps beside a model for `cpr serve` (model/costs.py): the
file round-trips exactly, is bounded, is ignored when unreadable or another model's, and is
used only where computing gives the same bits; a server that starts from it answers as one
that computes every cost."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from cpr_neo4j.model import costs as costs_mod
from cpr_neo4j.model.costs import CostCache, checked_table, read_table, save_table
from cpr_neo4j.search.base import Step

A, B = Step("directed_by", True), Step("starred_actors", False)


def _cache(entries: dict) -> CostCache:
    c = CostCache()
    c.put(list(entries), list(entries.values()))
    return c


def test_a_table_round_trips_the_same_keys_and_float32_bits(tmp_path):
    costs = {
        ("who directed ENT", (A,)): float(np.float32(-1.2345678)),
        ("who directed ENT", (B, A)): float(np.float32(0.1)),
        ("what did ENT star in", (B,)): float(np.float32(3.75e-8)),
    }
    assert save_table(tmp_path, "rcv-1", _cache(costs)) == 3
    back = read_table(tmp_path, "rcv-1")
    assert back == costs and all(isinstance(s, Step) for _, p in back for s in p)
    # a later calibration adds to it; the old entries stay
    more = {("who wrote ENT", (A, B)): 2.5}
    assert save_table(tmp_path, "rcv-1", _cache(more)) == 4
    assert read_table(tmp_path, "rcv-1") == costs | more
    assert not list(tmp_path.glob("*.tmp.npz"))  # written aside, then moved in place


def test_a_table_keeps_the_newest_entries_within_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(costs_mod, "MAX_COSTS", 3)
    save_table(tmp_path, "rcv-1", _cache({(f"q{i}", (A,)): float(i) for i in range(3)}))
    save_table(tmp_path, "rcv-1", _cache({("q9", (B,)): 9.0}))
    newest = {("q1", (A,)): 1.0, ("q2", (A,)): 2.0, ("q9", (B,)): 9.0}
    assert read_table(tmp_path, "rcv-1") == newest


def test_another_models_or_a_broken_table_is_not_used(tmp_path, caplog):
    save_table(tmp_path, "rcv-1", _cache({("q", (A,)): 1.0}))
    with caplog.at_level(logging.WARNING):
        assert read_table(tmp_path, "rcv-2") == {}
    assert "not model rcv-2's" in caplog.text
    (tmp_path / costs_mod.TABLE).write_bytes(b"PK\x03\x04 not a zip")
    assert read_table(tmp_path, "rcv-1") == {}
    assert read_table(tmp_path / "absent", "rcv-1") == {}


@pytest.mark.neo4j
def test_calibration_keeps_costs_that_computing_gives_bit_for_bit(two_hop, tmp_path):
    """Every sampled entry of the table the calibration wrote equals a fresh scorer's cost,
    computed in one batch per question without any kept cost."""
    from cpr_neo4j.model.store import load_scorer, model_dir

    env = two_hop.env()
    try:
        folder = model_dir(two_hop.model_id)
        table = read_table(folder, two_hop.model_id)
        assert len(table) == two_hop.cal.costs_kept > 1000
        fresh = load_scorer(two_hop.model_id)
        keys = list(table)[:: max(1, len(table) // 400)]
        by_text: dict[str, list] = {}
        for text, path in keys:
            by_text.setdefault(text, []).append(path)
        for text, paths in by_text.items():
            got = fresh.score(fresh.question(text), paths).tolist()
            assert got == [table[(text, p)] for p in paths], text
        assert checked_table(load_scorer(two_hop.model_id), folder, two_hop.model_id) == table
        # a table whose costs this machine does not compute is not used
        edited = {k: v + 1e-3 for k, v in table.items()}
        save_table(tmp_path, two_hop.model_id, _cache(edited))
        assert checked_table(load_scorer(two_hop.model_id), tmp_path, two_hop.model_id) == {}
    finally:
        env.undo()


@pytest.mark.neo4j
def test_a_server_starting_from_the_table_answers_as_one_computing_every_cost(
    store, metaqa, two_hop, monkeypatch
):
    from cpr_neo4j.graph import records
    from cpr_neo4j.model.store import model_dir
    from cpr_neo4j.serve.answer import answer
    from cpr_neo4j.serve.cache import ScorerPool
    from cpr_neo4j.serve.schemas import AskRequest

    node = records.latest_calibration(store, "metaqa", hops_filter=2)
    assert node["model"] == two_hop.model_id, "another 2-hop calibration is newer"
    env = two_hop.env()
    kept, computing = ScorerPool(), ScorerPool()
    asked: list[str] = []
    try:
        table = read_table(model_dir(two_hop.model_id), two_hop.model_id)
        with kept.lease(two_hop.model_id) as scorer:
            assert len(scorer.costs) == len(table) > 0
        with monkeypatch.context() as m:
            m.setattr(costs_mod, "TABLE", "absent.npz")
            with computing.lease(two_hop.model_id) as scorer:
                assert len(scorer.costs) == 0
        questions = records.questions(store, "metaqa", "test", 2)[:12]
        for q in questions:
            req = AskRequest(question=q.text, dataset="metaqa", alpha=0.1, hops=2)
            a, b = answer(store, kept, req), answer(store, computing, req)
            asked += [a.ask_id, b.ask_id]
            skip = {"ask_id", "browser_url", "cypher"}
            assert a.model_dump(exclude=skip) == b.model_dump(exclude=skip), q.text
    finally:
        env.undo()
        if asked:
            store.write("delete_asks", ids=asked)


@pytest.mark.neo4j
def test_the_canary_computes_its_costs_rather_than_reading_kept_ones(store, metaqa, two_hop):
    """A kept cost (the calibration's own table) must not stand in for this machine's
    arithmetic: the canary computes its pairs even when the scorer keeps other values."""
    import json

    from cpr_neo4j.graph import records
    from cpr_neo4j.model.store import load_scorer
    from cpr_neo4j.stages import canary

    node = records.latest_calibration(store, "metaqa", hops_filter=2)
    assert node["model"] == two_hop.model_id, "another 2-hop calibration is newer"
    items = [i for i in json.loads(node["canary"]) if i["paths"]]
    env = two_hop.env()
    try:
        scorer = load_scorer(two_hop.model_id)
        assert items and canary.drift(scorer, items) == 0.0
        keys = [(i["q"], canary._path(p)) for i in items for p in i["paths"]]
        wrong = [c + 1.0 for i in items for c in i["costs"]]
        scorer.costs.put(keys, wrong)
        assert canary.drift(scorer, items) == 0.0
        assert scorer.costs.get(keys) == wrong  # the scorer's store is left as it was
    finally:
        env.undo()
