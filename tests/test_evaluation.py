"""The evaluation stage on real MetaQA in a real Neo4j: question shares, model selection,
the deployed protocol against `cpr calibrate`, and the train -> eval -> calibrate -> ask
sequence serving CPR (never the ablation eval trains)."""

from __future__ import annotations

import math

import pytest

from cpr_neo4j.conformal.guarantee import request
from cpr_neo4j.evaluation.evaluate import INNER_DEV, EvalSettings, run
from cpr_neo4j.graph import records
from cpr_neo4j.model.store import read_config
from cpr_neo4j.stages.ask import ask
from cpr_neo4j.stages.calibrate import calibrate, resolve_model
from cpr_neo4j.stages.train import TrainSettings, train
from tests.conftest import drop_models, private_home

pytestmark = [pytest.mark.neo4j, pytest.mark.slow]

SMALL = {"max_questions": 80, "rollouts": 8, "cal_share": 0.05, "dev_share": 0.02}
ALPHAS = (0.1, 0.3, 0.5)


@pytest.fixture(scope="module")
def models(store, metaqa, tmp_path_factory):
    """CPR at 1 hop, then eval (which trains Abl.2 at 1 hop), then CPR at 2 hops."""
    mp = pytest.MonkeyPatch()
    home = private_home(tmp_path_factory, "cpr_home_eval")
    mp.setenv("CPR_HOME", str(home))
    try:  # a failed setup must not leave CPR_HOME pointing here for later modules
        cpr1 = train(store, TrainSettings("metaqa", hops=1, **SMALL)).model_id
        evaluated = run(
            store,
            EvalSettings(
                "metaqa",
                alphas=ALPHAS,
                hops=1,
                max_questions=150,
                hop_level_questions=30,
                boot=200,
                draws=50,
            ),
            say=lambda _: None,
            out_dir=home / "report",
        )
        cpr2 = train(store, TrainSettings("metaqa", hops=2, **SMALL)).model_id
        yield {"cpr1": cpr1, "cpr2": cpr2, "eval": evaluated}
        drop_models(store, [cpr1, cpr2, evaluated.models["Abl.2 (w/o PUCT)"]])
    finally:
        mp.undo()


def test_calibration_inner_dev_and_training_questions_never_overlap(models):
    meta = read_config(models["cpr1"])["meta"]
    cal, dev, fit = (set(meta[k]) for k in ("calibration_ids", "inner_dev_ids", "training_ids"))
    assert cal and dev and fit
    assert not (cal & dev) and not (cal & fit) and not (dev & fit)


def test_default_model_is_cpr_for_the_hop_filter_never_the_ablation(store, models):
    assert resolve_model(store, "metaqa", None, 1) == models["cpr1"]  # Abl.2 is newer
    assert resolve_model(store, "metaqa", None, 2) == models["cpr2"]  # same depth rule
    node = records.model_node(store, models["cpr1"])
    assert node["negatives"] == "puct" and node["hops_filter"] == 1


def test_abl2_is_trained_without_puct(store, models):
    abl2 = models["eval"].models["Abl.2 (w/o PUCT)"]
    node = records.model_node(store, abl2)
    assert node["negatives"] == "random" and node["rollout_successes"] == 0
    assert set(read_config(abl2)["rho"].values()) <= {0.5}  # uniform priors


def test_deployed_tau_is_the_tau_cpr_calibrate_writes(store, models):
    """`cpr eval`'s CPR row (the test split's working half) is answered with the thresholds
    `cpr calibrate` writes: the same calibration questions, linking, score family, delta
    and groups; per group, for every alpha."""
    cal = calibrate(store, "metaqa", models["cpr1"], alphas=ALPHAS)
    head = models["eval"].deployed
    for a in ALPHAS:
        row = head.row("CPR", a)
        assert row.tau and set(cal.groups) - {0} <= set(row.tau)
        for g, tau in row.tau.items():
            assert tau == pytest.approx(cal.calibrated.threshold(request(a, cal.delta), g).value)
        fnr = head.row("CPR, answer recall (FNR)", a)
        for g, lam in fnr.tau.items():
            assert lam == pytest.approx(cal.calibrated.threshold(request(a, 0, "fnr"), g).value)
    assert head.n_cal == cal.n


def test_the_report_has_both_views_and_the_fair_hop_level_baseline(models):
    out = models["eval"]
    methods = out.deployed.methods
    assert {"CPR", "Abl.1 (V_sem)", "Abl.2 (w/o PUCT)", "top-k (CPR)"} <= set(methods)
    hop = [m for m in methods if m.startswith("UaG hop-level")]
    assert len(hop) == 2
    for m in hop:
        for a in ALPHAS:
            row = out.deployed.row(m, a)
            assert len(row.tau) == 1 and row.n_test == 30
            assert row.ecr * 30 == pytest.approx(round(row.ecr * 30))  # a share of 30
    # Bonferroni at H = 1 is the uncorrected threshold
    assert out.deployed.row(hop[0], 0.1).tau == out.deployed.row(hop[1], 0.1).tau
    for m in ("CPR", "top-k (CPR)"):  # the pooled view, a second view on each row
        pooled = out.deployed.row(m, 0.3).pooled
        assert set(pooled) == {"ecr_mean", "ecr_p5", "held"}  # values: test_deployed's
        assert all(math.isfinite(v) for v in pooled.values())
    assert [x.method for x in out.deployed.diagnoses][0] == "CPR"
    assert {"Abl.1 (V_sem)", "Abl.2 (w/o PUCT)"} <= {x.method for x in out.deployed.diagnoses}
    for kind in ("json", "markdown", "ecr_plot", "apss_plot"):
        assert out.files[kind].exists()


def test_train_eval_calibrate_ask_serves_cpr(store, models):
    abl2 = models["eval"].models["Abl.2 (w/o PUCT)"]
    calibrate(store, "metaqa", abl2, alphas=ALPHAS)  # a newer calibration, of the ablation
    cal = calibrate(store, "metaqa", alphas=ALPHAS, hops_filter=1)
    assert cal.model_id == models["cpr1"]
    calibrate(store, "metaqa", abl2, alphas=ALPHAS)  # the ablation's again, newest of all
    r = ask(store, "which movies did [Ridley Scott] direct", 0.3, dataset="metaqa", hops_filter=1)
    assert r.model_id == models["cpr1"]
    q = "which movies did [Ridley Scott] direct"
    pinned = ask(store, q, 0.3, dataset="metaqa", model_id=abl2)
    assert pinned.model_id == abl2  # --model still reaches it on purpose


def test_inner_dev_split_is_answered(store, models):
    out = run(
        store,
        EvalSettings(
            "metaqa",
            alphas=(0.3,),
            hops=1,
            methods=("cpr",),
            split=INNER_DEV,
            hop_level=False,
            boot=100,
            model_id=models["cpr1"],
        ),
        say=lambda _: None,
        out_dir=None,
    )
    dev = set(read_config(models["cpr1"])["meta"]["inner_dev_ids"])
    assert 0 < out.deployed.n_test <= len(dev)


def _eval_cpr1(store, models, **settings):
    """The 1-hop CPR model and Abl.1 evaluated without hop-level rows or a report."""
    s = EvalSettings("metaqa", hops=1, methods=("cpr", "abl1"), hop_level=False, boot=100,
                     draws=20, model_id=models["cpr1"], **settings)  # fmt: skip
    return run(store, s, say=lambda _: None, out_dir=None)


def test_a_set_temperature_replaces_the_fitted_one_for_cpr_only(store, models):
    fitted = read_config(models["cpr1"])["meta"]["temperature"]
    t = 0.5 if not math.isclose(fitted, 0.5) else 1.5
    out = _eval_cpr1(store, models, alphas=(0.3,), split=INNER_DEV, temperature=t)
    notes = "\n".join(out.deployed.notes)
    assert f"CPR: score surprisal at T = {t:.4g} (set by the evaluation)" in notes
    assert f"Abl.1 (V_sem): score surprisal at T = {t:.4g} (set" not in notes  # its own fit


def test_workers_give_the_numbers_one_process_gives(store, models):
    """Questions shared among forked workers (their own drivers and caches) and merged back
    in order: every row equals the one-process run's, bit for bit. A worker scores with one
    thread (model.threads: ONNX Runtime and BLAS) and other batches; the one-process run
    with every core. The numpy scorer's products are exact (model.exact), so no batch,
    thread count or BLAS kernel moves a cost, and MetaQA's same-template questions, which
    tie exactly at tau, tie in both."""

    def rows(workers: int) -> dict:
        out = _eval_cpr1(store, models, alphas=ALPHAS, max_questions=60, workers=workers)
        assert len(out.deployed.rows) >= 3 * len(ALPHAS)  # CPR, Abl.1, top-k at least
        fields = ("tau", "ecr", "ecr_lo", "ecr_hi", "ecr_lo_cal", "ecr_hi_cal", "fnr", "fnr_lo",
                  "fnr_hi", "apss", "recall_cal", "recall", "pooled")  # fmt: skip
        return {
            (r.method, r.alpha): {k: repr(getattr(r, k)) for k in fields}  # repr: nan == nan
            | {"hits1": repr(r.metrics["hits1"])}
            for r in out.deployed.rows
        }

    one = rows(1)
    two = rows(2)
    assert one.keys() == two.keys()
    differ = {
        (row, k): (v, two[row][k])
        for row, d in one.items()
        for k, v in d.items()
        if v != two[row][k]
    }
    assert not differ, differ
