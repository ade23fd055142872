"""The scorer canary decides in score units: a cost change d moves a surprisal by at most
2 d / T, so the tolerance it allows on costs follows from the calibration's temperature."""

from __future__ import annotations

import numpy as np
import pytest

from cpr_neo4j.conformal.threshold import TOLERANCE
from cpr_neo4j.errors import Conflict
from cpr_neo4j.search.answers import _log_softmax
from cpr_neo4j.stages import canary
from cpr_neo4j.stages.scoring import TEMPERATURE_GRID


class Shifted:
    """Scores every path at its stored cost plus `shift`."""

    def __init__(self, costs, shift):
        # `costs` on a scorer is its store of kept costs (the canary computes without it)
        self.stored, self.shift = costs, shift

    def question(self, text):
        return text

    def score(self, ctx, paths):
        return np.asarray(self.stored[: len(paths)], dtype=np.float32) + np.float32(self.shift)


ITEM = {"q": "who directed ENT", "paths": [["directed_by"], ["~starred_actors"]]}


def test_the_surprisal_moves_by_at_most_two_cost_changes_over_t():
    rng = np.random.default_rng(0)
    for t in (0.02, 0.3, 3.0):
        c = rng.normal(size=50)
        d = rng.uniform(-1e-6, 1e-6, size=50)
        moved = np.abs(_log_softmax(c + d, t) - _log_softmax(c, t)).max()
        assert moved <= 2 * np.abs(d).max() / t * (1 + 1e-6)


@pytest.mark.parametrize("t", [0.02, 0.3, 3.0])
def test_the_canary_allows_a_cost_change_by_the_calibrations_temperature(t):
    costs = [0.5, 1.25]
    spec = {"family": "surprisal", "T": t}
    allowed = TOLERANCE * t / 2  # the largest cost change the cut's slack absorbs
    item = {**ITEM, "costs": costs}
    assert canary.check(Shifted(costs, 0.0), [item], "c1", spec=spec) == 0.0
    assert canary.check(Shifted(costs, allowed / 2), [item], "c1", spec=spec) <= TOLERANCE
    with pytest.raises(Conflict, match="scores paths differently from calibration c1"):
        canary.check(Shifted(costs, allowed * 2), [item], "c1", spec=spec)


def test_without_the_score_family_the_smallest_fitted_temperature_decides():
    assert canary.score_per_cost(None) == 2 / min(TEMPERATURE_GRID)
    assert canary.score_per_cost({"family": "centred", "centre": 0.97}) == pytest.approx(1.97)
    item = {**ITEM, "costs": [0.5, 1.25]}
    with pytest.raises(Conflict):
        canary.check(Shifted([0.5, 1.25], 4e-6), [item], "c1")  # 4e-4 at T = 0.02


# ---- the canary sees the encoder ------------------------------------------------------
# Calibration saves every text it embedded (texts.npz) and a scorer keeps its embeddings:
# a canary that read either would compare this machine's net with the calibration's
# embeddings, never this machine's encoder with the calibration's. These tests run a real
# ONNX export, as `cpr ask` does.

CANARY_TEXTS = ["who directed ENT", "which films did ENT star in", "what genre is ENT"]
STEPS = [["directed_by"], ["~starred_actors"], ["has_genre"], ["~directed_by", "has_genre"]]
RELATIONS = {"directed_by": "directed by", "starred_actors": "starred actors", "has_genre": "genre"}
T = 0.3  # the calibration's temperature in these tests (a surprisal family)


@pytest.fixture(scope="module")
def calibrated():
    """A scorer as calibration had it, the canary it stored, and its embeddings as saved."""
    from cpr_neo4j.model.encoder import TextEncoder
    from cpr_neo4j.model.scorer import PathScorer

    encoder = TextEncoder()
    scorer = PathScorer(encoder, RELATIONS)
    paths = [canary._path(p) for p in STEPS]
    items = [
        {
            "q": q,
            "paths": STEPS,
            "costs": [float(c) for c in scorer.score(scorer.question(q), paths)],
        }
        for q in CANARY_TEXTS
    ]
    saved = scorer.embedded()  # what calibration writes to texts.npz
    return encoder, items, saved


def _serving(encoder_path, saved, optimise=True):
    """A scorer of another process: its encoder runs `encoder_path` (same manifest, so the
    same model name) and finds the calibration's saved embeddings on disk."""
    import onnxruntime as ort

    from cpr_neo4j.model.embedder import OnnxEmbedder
    from cpr_neo4j.model.encoder import TextEncoder
    from cpr_neo4j.model.scorer import PathScorer

    encoder = TextEncoder(threads=1)
    embedder = OnnxEmbedder(encoder_path, encoder.model_dir, "cpu", 1)
    if not optimise:  # another ONNX Runtime setting: no graph fusions (other kernels run)
        embedder._open()
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.intra_op_num_threads = 1
        embedder._session = ort.InferenceSession(str(encoder_path), opts)
    encoder._embedder = embedder
    texts, vectors = saved
    encoder._disk = ({t: i for i, t in enumerate(texts)}, vectors)  # texts.npz, as saved
    return PathScorer(encoder, RELATIONS)


def test_the_canary_is_silent_when_nothing_moved(calibrated):
    encoder, items, saved = calibrated
    scorer = _serving(encoder.manifest["path"], saved)
    assert canary.check(scorer, items, "c1", spec={"family": "surprisal", "T": T}) == 0.0


@pytest.fixture(scope="module")
def edited(calibrated, tmp_path_factory):
    """The export with one weight matrix scaled by 1 + 1e-3: the same file size, so the
    same manifest and model name."""
    import onnx
    from onnx import numpy_helper

    encoder, _, _ = calibrated
    model = onnx.load(encoder.manifest["path"])
    weights = max(model.graph.initializer, key=lambda t: int(np.prod(t.dims)))
    moved = numpy_helper.to_array(weights) * np.float32(1 + 1e-3)
    weights.CopyFrom(numpy_helper.from_array(moved, weights.name))
    path = tmp_path_factory.mktemp("edited") / "model.onnx"
    onnx.save(model, str(path))
    return path


def test_the_canary_fires_when_the_model_file_was_edited(calibrated, edited):
    """The calibration's saved embeddings still answer every canary text."""
    encoder, items, saved = calibrated
    scorer = _serving(edited, saved)
    paths = [canary._path(p) for p in STEPS]
    # what a scorer of that process computes reads the saved embeddings: no difference ...
    ctx = scorer.question(items[0]["q"])
    assert scorer.score(ctx, paths).tolist() == items[0]["costs"]
    # ... while the canary embeds its texts with the edited file and sees the move
    spec = {"family": "surprisal", "T": T}
    assert canary.drift(scorer, items) * canary.score_per_cost(spec) > TOLERANCE
    with pytest.raises(Conflict, match="scores paths differently from calibration c1"):
        canary.check(scorer, items, "c1", spec=spec)


def test_the_canary_sees_a_runtime_setting_that_changes_bits(calibrated):
    """ONNX Runtime without graph fusions runs other kernels (~1e-7 per coordinate here):
    the canary reports what those embeddings do to the costs, in score units, as a scorer
    that never saw the saved embeddings computes them; here inside the cut's slack."""
    encoder, items, saved = calibrated
    scorer = _serving(encoder.manifest["path"], saved, optimise=False)
    spec = {"family": "surprisal", "T": T}
    moved = canary.check(scorer, items, "c1", spec=spec)
    unsaved = _serving(encoder.manifest["path"], ([], np.zeros((0, 384), np.float32)), False)
    paths = [canary._path(p) for p in STEPS]
    worst = max(
        float(np.abs(unsaved.score(unsaved.question(i["q"]), paths) - i["costs"]).max())
        for i in items
    )
    assert moved == worst * canary.score_per_cost(spec) <= TOLERANCE


def test_the_cost_tables_load_check_sees_the_encoder(calibrated, edited, tmp_path):
    """The table `cpr calibrate` keeps is used only when this machine computes the same
    bits for a sample of it, embedding that sample afresh: a server whose encoder moved
    does not use it, though the saved embeddings would have reproduced every entry."""
    from cpr_neo4j.model.costs import CostCache, checked_table, save_table

    encoder, items, saved = calibrated
    kept = CostCache()
    for i in items:
        kept.put([(i["q"], canary._path(p)) for p in i["paths"]], i["costs"])
    save_table(tmp_path, "m1", kept)
    same, moved = _serving(encoder.manifest["path"], saved), _serving(edited, saved)
    assert len(checked_table(same, tmp_path, "m1")) == len(kept) > 0
    assert checked_table(moved, tmp_path, "m1") == {}


# ---- a verdict remembered per calibration and machine -----------------------------------
# A cold `cpr ask` would otherwise open an ONNX Runtime session for the canary's texts
# alone. The verdict is reused only where everything that decides the bits is the same.


def test_a_remembered_verdict_spares_the_next_process_the_embedding(
    calibrated, tmp_path, monkeypatch
):
    encoder, items, saved = calibrated
    monkeypatch.setenv("CPR_HOME", str(tmp_path))
    spec = {"family": "surprisal", "T": T}
    first = canary.check(
        _serving(encoder.manifest["path"], saved), items, "c1", spec=spec, remember="c1@t"
    )
    assert len(list((tmp_path / canary.VERDICTS).glob("*.json"))) == 1

    def embeds(*_a, **_k):
        raise AssertionError("the canary embedded its texts again")

    monkeypatch.setattr(canary, "drift", embeds)
    again = _serving(encoder.manifest["path"], saved)  # another process, the same machine
    assert canary.check(again, items, "c1", spec=spec, remember="c1@t") == first
    with pytest.raises(AssertionError, match="embedded its texts again"):
        canary.check(again, items, "c1", spec=spec, remember="c2@t")  # another calibration
    tampered = [dict(items[0], costs=[c + 1.0 for c in items[0]["costs"]]), *items[1:]]
    with pytest.raises(AssertionError, match="embedded its texts again"):
        canary.check(again, tampered, "c1", spec=spec, remember="c1@t")  # its canary changed


def test_a_verdict_is_not_reused_when_the_model_file_is_edited_in_place(
    calibrated, edited, tmp_path, monkeypatch
):
    """Same path, same size: the edit is seen (the file's change time and inode are part
    of the machine), so the canary embeds again and fires."""
    import shutil

    encoder, items, saved = calibrated
    monkeypatch.setenv("CPR_HOME", str(tmp_path / "home"))
    spec = {"family": "surprisal", "T": T}
    model = tmp_path / "model.onnx"
    shutil.copyfile(encoder.manifest["path"], model)
    assert canary.check(_serving(model, saved), items, "c1", spec=spec, remember="c1@t") == 0.0
    model.write_bytes(edited.read_bytes())
    assert model.stat().st_size == edited.stat().st_size
    with pytest.raises(Conflict, match="scores paths differently from calibration c1"):
        canary.check(_serving(model, saved), items, "c1", spec=spec, remember="c1@t")


def test_the_machine_names_what_decides_the_bits(calibrated, monkeypatch):
    from cpr_neo4j.model import threads

    encoder, _, saved = calibrated
    scorer = _serving(encoder.manifest["path"], saved)
    base = canary.machine(scorer)
    assert base is not None and base["scorer"][0] == scorer.model_id
    with threads.limited(base["threads"][1] + 1):
        assert canary.machine(scorer)["threads"] != base["threads"]
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")
    assert canary.machine(scorer)["env"]["OPENBLAS_CORETYPE"] == "Prescott"
    assert canary.machine(object()) is None  # a stub scorer: nothing is remembered
