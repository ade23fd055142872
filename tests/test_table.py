"""evaluation.table: the flat candidate table evaluation reads (built, cut, merged, saved)."""

from __future__ import annotations

import numpy as np
import pytest

from cpr_neo4j.evaluation.table import CandidateTable, TableBuilder

COLUMNS = ("hops", "template", "group", "n_gold", "start", "cost", "gold", "surprisal")


def _hand_made(temperature: float = 0.5) -> CandidateTable:
    """Four questions, candidates in rank order (cost, then id):
    q1: 3 candidates, gold {a, c, lost} (lost is not among them), a tie at 0.5;
    q2: linking failed, no candidates (group 0);
    q3: 2 candidates, none gold, same template as q1;
    q4: no hop count (hops None), 1 gold candidate of 1."""
    b = TableBuilder(temperature)
    b.add("q1", 2, "who directed [X]", {"a", "c", "lost"}, ["a", "b", "c"],
          np.array([0.1, 0.5, 0.5]), np.array([0.2, 1.1, 1.1]), 2)  # fmt: skip
    b.add("q2", 1, "when was [X] born", frozenset({"y"}), [], np.zeros(0), np.zeros(0), 0)
    b.add("q3", 2, "who directed [X]", frozenset({"z"}), ["d", "e"], np.array([-1.0, 3.0]),
          np.array([0.05, 4.0]), 1)  # fmt: skip
    b.add("q4", None, "[X] is in which genre", frozenset({"f"}), ["f"], np.array([0.0]),
          np.array([0.0]), 1)  # fmt: skip
    return b.build()


def _assert_same(a: CandidateTable, b: CandidateTable) -> None:
    assert a.qids == b.qids
    assert [a.templates[i] for i in a.template] == [b.templates[i] for i in b.template]
    for col in COLUMNS:
        if col != "template":
            x, y = getattr(a, col), getattr(b, col)
            assert x.dtype == y.dtype and np.array_equal(x, y), col
    assert a.temperature == b.temperature


def test_builder_columns_by_hand():
    t = _hand_made()
    assert t.n == 4 and t.qids == ["q1", "q2", "q3", "q4"]
    assert t.hops.dtype == np.int8 and t.hops.tolist() == [2, 1, 2, -1]  # -1: no hop count
    assert t.templates == ["who directed [X]", "when was [X] born", "[X] is in which genre"]
    assert t.template.dtype == np.int32 and t.template.tolist() == [0, 1, 0, 2]
    assert t.group.dtype == np.int8 and t.group.tolist() == [2, 0, 1, 1]
    assert t.n_gold.dtype == np.int32 and t.n_gold.tolist() == [3, 1, 1, 1]  # "lost" counts
    assert t.start.dtype == np.int64 and t.start.tolist() == [0, 3, 3, 5, 6]
    assert t.cost.dtype == np.float64 and t.cost.tolist() == [0.1, 0.5, 0.5, -1.0, 3.0, 0.0]
    assert t.gold.dtype == bool and t.gold.tolist() == [True, False, True, False, False, True]
    assert t.surprisal.dtype == np.float32
    assert np.allclose(t.surprisal, [0.2, 1.1, 1.1, 0.05, 4.0, 0.0])
    assert t.temperature == 0.5 and t.meta == {}
    assert t.sizes.tolist() == [3, 0, 2, 1]
    assert t.qidx.tolist() == [0, 0, 0, 2, 2, 3]  # q2 has no rows
    assert len(t.qidx) == len(t.cost) == t.start[-1]


def test_empty_builder_gives_an_empty_table():
    t = TableBuilder(1.0).build()
    assert t.n == 0 and t.start.tolist() == [0] and t.cost.size == 0 and t.qidx.size == 0
    assert t.sizes.size == 0 and t.temperature == 1.0


def test_subset_keeps_the_order_asked_and_candidates_follow():
    t = _hand_made()
    s = t.subset([3, 0, 1])
    assert s.qids == ["q4", "q1", "q2"]
    assert s.hops.tolist() == [-1, 2, 1] and s.group.tolist() == [1, 2, 0]
    assert s.n_gold.tolist() == [1, 3, 1] and s.sizes.tolist() == [1, 3, 0]
    assert s.cost.tolist() == [0.0, 0.1, 0.5, 0.5] and s.gold.tolist() == [True, True, False, True]
    assert s.qidx.tolist() == [0, 1, 1, 1]
    assert [s.templates[i] for i in s.template] == [
        "[X] is in which genre",
        "who directed [X]",
        "when was [X] born",
    ]
    assert s.temperature == t.temperature
    # numpy rows, repeats, and nothing at all
    again = t.subset(np.array([2, 2]))
    assert again.qids == ["q3", "q3"] and again.cost.tolist() == [-1.0, 3.0, -1.0, 3.0]
    none = t.subset([])
    assert none.n == 0 and none.cost.size == 0 and none.start.tolist() == [0]
    # every question's rows, one question at a time, equal the table's own slices
    for i in range(t.n):
        one = t.subset([i])
        lo, hi = t.start[i], t.start[i + 1]
        assert np.array_equal(one.cost, t.cost[lo:hi]) and np.array_equal(one.gold, t.gold[lo:hi])
    t.meta["note"] = "x"
    assert t.subset([0]).meta == {"note": "x"} and t.subset([0]).meta is not t.meta


def test_concat_merges_templates_by_text():
    t = _hand_made()
    b = TableBuilder(0.5)
    b.add("r1", 3, "[X] is in which genre", frozenset({"g"}), ["g", "h"], np.array([1.0, 2.0]),
          np.array([0.3, 0.9]), 3)  # fmt: skip
    b.add("r2", 1, "a new template for [X]", frozenset({"k"}), ["j"], np.array([0.7]),
          np.array([0.0]), 1)  # fmt: skip
    u = b.build()
    both = CandidateTable.concat([t, u])
    assert both.qids == t.qids + u.qids
    # one code per distinct text, and every question keeps its own text
    assert len(both.templates) == len(set(both.templates)) == 4
    want = [t.templates[i] for i in t.template] + [u.templates[i] for i in u.template]
    assert [both.templates[i] for i in both.template] == want
    assert both.template[3] == both.template[4]  # q4 and r1 share "[X] is in which genre"
    assert both.start.tolist() == [0, 3, 3, 5, 6, 8, 9]
    assert both.cost.tolist() == t.cost.tolist() + u.cost.tolist()
    assert both.gold.tolist() == t.gold.tolist() + u.gold.tolist()
    assert both.hops.tolist() == [2, 1, 2, -1, 3, 1] and both.group.tolist() == [2, 0, 1, 1, 3, 1]
    assert both.qidx.tolist() == [0, 0, 0, 2, 2, 3, 4, 4, 5]
    # splitting and concatenating back gives the table again (what eval's workers do),
    # an empty share (a worker with no question) included
    _assert_same(CandidateTable.concat([t.subset([0, 1]), t.subset([]), t.subset([2, 3])]), t)
    # and concat then subset puts the questions back in any order
    back = CandidateTable.concat([t.subset([2, 3]), t.subset([0, 1])]).subset([2, 3, 0, 1])
    _assert_same(back, t)


def test_save_load_round_trip(tmp_path):
    t = _hand_made(temperature=0.37)
    path = tmp_path / "cal.npz"
    t.save(path)
    back = CandidateTable.load(path)
    _assert_same(back, t)
    assert back.templates == t.templates and np.array_equal(back.template, t.template)
    assert back.temperature == pytest.approx(0.37) and isinstance(back.temperature, float)
    assert back.sizes.tolist() == t.sizes.tolist() and back.qidx.tolist() == t.qidx.tolist()
    # an empty table survives too
    TableBuilder(0.0).build().save(tmp_path / "empty.npz")
    empty = CandidateTable.load(tmp_path / "empty.npz")
    assert empty.n == 0 and empty.qids == [] and empty.cost.size == 0


def test_a_larger_random_table_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    b = TableBuilder(0.8)
    for i in range(300):
        m = int(rng.integers(0, 12))
        ids = [f"q{i}e{j}" for j in range(m)]
        cost = np.sort(np.round(rng.normal(size=m), 1))
        gold = {f"q{i}e{j}" for j in rng.choice(12, 2)}
        b.add(f"q{i}", int(rng.integers(1, 4)), f"t{rng.integers(20)}", gold, ids, cost,
              rng.random(m), int(rng.integers(0, 4)))  # fmt: skip
    t = b.build()
    t.save(tmp_path / "t.npz")
    _assert_same(CandidateTable.load(tmp_path / "t.npz"), t)
    # gold flags are exactly the ids found in each question's gold set
    assert (np.bincount(t.qidx[t.gold], minlength=t.n) <= t.n_gold).all()
    assert t.sizes.sum() == len(t.cost) and (t.sizes >= 0).all()
