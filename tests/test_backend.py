"""Scoring without torch: the ONNX encoder export and its check, the numpy RCVNet against
the torch one, model ids and weights.npz, import hygiene, fork safety.

The export is built once per test session into a private CPR_HOME (seconds)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cpr_neo4j.errors import CprError
from cpr_neo4j.model import export, threads
from cpr_neo4j.model.rcvnet import RCVConfig, RCVWeights
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.search.base import Step
from cpr_neo4j.training.puct import EntityPath, PathPair

HEAVY = ("torch", "transformers", "sentence_transformers", "scipy.stats", "polars", "matplotlib")
MODEL_MODULES = (
    "cpr_neo4j.model.encoder",
    "cpr_neo4j.model.embedder",
    "cpr_neo4j.model.export",
    "cpr_neo4j.model.rcvnet",
    "cpr_neo4j.model.scorer",
    "cpr_neo4j.model.store",
    "cpr_neo4j.model.train",
    "cpr_neo4j.model.threads",
    "cpr_neo4j.stages.workers",
)
D, A, G = Step("directed_by", True), Step("starred_actors", False), Step("has_genre", True)


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """(CPR_HOME with this installation's export built into it, the manifest). CPR_HOME
    points there only while the export is built (tests take it with `in_home`): a session
    fixture that left it set would hide the local server's credentials from every later
    module."""
    home = tmp_path_factory.mktemp("cpr_encoder_home")
    mp = pytest.MonkeyPatch()
    mp.setenv("CPR_HOME", str(home))
    try:
        manifest = export.installed()
    finally:
        mp.undo()
    return home, manifest


@pytest.fixture
def in_home(exported, monkeypatch):
    monkeypatch.setenv("CPR_HOME", str(exported[0]))
    return exported


class FakeEncoder:
    """Deterministic unit vectors per text: scorer tests without the real encoder."""

    model_name, dim = "fake-encoder", 384

    def encode(self, texts, cache=True):
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=384)
            out[i] = v / np.linalg.norm(v)
        return out


def random_weights(seed: int = 0, config: RCVConfig | None = None) -> RCVWeights:
    """At torch's init scale (1 / sqrt(fan in)), with a non-zero output layer."""
    config = config or RCVConfig()
    rng = np.random.default_rng(seed)
    shapes = config.shapes()
    fan_in = {k: shapes[k.rsplit(".", 1)[0] + ".weight"][1] for k in shapes}
    return RCVWeights(
        {k: rng.uniform(-1, 1, size=s) / np.sqrt(fan_in[k]) for k, s in shapes.items()}, config
    )


def unit_blocks(rng, n: int, blocks: int) -> np.ndarray:
    """c as the scorer builds it: `blocks` unit vectors of 384 side by side."""
    v = rng.normal(size=(n, blocks, 384))
    return (v / np.linalg.norm(v, axis=2, keepdims=True)).reshape(n, -1).astype(np.float32)


# ---- import hygiene -----------------------------------------------------------------


def test_model_modules_import_no_heavy_stack():
    probe = (
        f"import sys\nimport {', '.join(MODEL_MODULES)}\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


# ---- the export ---------------------------------------------------------------------


def test_export_manifest_names_weights_and_export(in_home):
    home, manifest = in_home
    model = home / "encoders" / export.export_folder().name / export.MODEL
    assert manifest["path"] == str(model)
    assert re.fullmatch(r"all-MiniLM-L6-v2-[0-9a-f]{12}-onnx-[0-9a-f]{12}", manifest["encoder_id"])
    assert manifest["onnx_sha256"] == export.file_sha256(model)
    weights = export.weight_files(export.bundled_model_dir())
    assert manifest["weights_sha256"] == export.file_sha256(*weights)
    assert manifest["encoder_id"].split("-onnx-")[0].endswith(manifest["weights_sha256"][:12])
    assert 0 <= manifest["probe"]["max_abs_diff"] <= export.TOLERANCE
    assert manifest["probe"]["texts"] == len(export.PROBE_TEXTS) >= 40
    assert manifest["versions"]["onnxruntime"] and manifest["versions"]["torch"]
    built = model.stat().st_mtime_ns
    assert export.installed() == manifest and model.stat().st_mtime_ns == built  # no rebuild


def test_encoder_runs_the_export_and_pins_its_id(in_home):
    from cpr_neo4j.model.encoder import TextEncoder

    _, manifest = in_home
    enc = TextEncoder(threads=1)
    assert enc.model_name == manifest["encoder_id"] and enc.device == "cpu"
    texts = ["which movies did ENT direct", "directed by ENT", "", "word " * 400]
    out = enc.encode(texts)
    assert out.shape == (4, 384) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    # embed_now reads no cache (encode would return `out`'s own vectors, cached just above)
    alone = np.stack([enc.embed_now([t])[0] for t in texts])
    assert np.array_equal(out, alone)  # equal-length groups: no padding, batch-independent
    # measured, not constructed (docs/method.md): another intra-op thread count, same bits
    assert np.array_equal(out, TextEncoder(threads=2).embed_now(texts[::-1])[::-1])
    scorer = PathScorer(enc, {})
    sim = scorer.similarity(texts[:2], texts[:1])
    assert np.array_equal(sim[:1], scorer.similarity(texts[:1], texts[:1]))  # exact products
    assert np.allclose(sim[:, 0], out[:2] @ out[0], rtol=0, atol=1e-6)


def tampered(src, dst):
    """A copy of the export with one weight matrix scaled by 1.01."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    model = onnx.load(str(src))
    init = max(
        (i for i in model.graph.initializer if len(i.dims) == 2 and i.dims[0] < 10_000),
        key=lambda i: i.dims[0] * i.dims[1],
    )
    scaled = numpy_helper.to_array(init) * np.float32(1.01)
    init.CopyFrom(numpy_helper.from_array(scaled, init.name))
    onnx.save(model, str(dst))
    return dst


def test_check_refuses_a_tampered_or_broken_export(in_home, tmp_path):
    _, manifest = in_home
    bad = tampered(manifest["path"], tmp_path / "tampered.onnx")
    with pytest.raises(CprError, match="tolerance") as info:
        export.check(bad)
    assert "\n" not in str(info.value)
    texts, diff = export.probe_check(bad)
    assert texts == list(export.PROBE_TEXTS) and diff > export.TOLERANCE
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(Path(manifest["path"]).read_bytes()[: 1 << 20])
    with pytest.raises(CprError, match="does not run"):
        export.check(broken)


def test_build_keeps_no_refused_export(in_home, tmp_path, monkeypatch):
    _, manifest = in_home
    bad = tampered(manifest["path"], tmp_path / "tampered.onnx")
    monkeypatch.setattr(export, "export_onnx", lambda model_dir, path: shutil.copy(bad, path))
    monkeypatch.setenv("CPR_HOME", str(tmp_path / "home"))
    with pytest.raises(CprError, match="refused"):
        export.installed()
    assert not any((tmp_path / "home" / "encoders").iterdir())  # nothing published or left


def test_a_changed_export_file_is_refused(in_home, tmp_path, monkeypatch):
    home, manifest = in_home
    copy = tmp_path / "home"
    shutil.copytree(home / "encoders", copy / "encoders")
    monkeypatch.setenv("CPR_HOME", str(copy))
    model = copy / "encoders" / export.export_folder().name / export.MODEL
    with model.open("ab") as fh:
        fh.write(b"\0")
    with pytest.raises(CprError, match="delete that folder"):
        export.installed()


def test_build_needs_torch_and_says_so(tmp_path, monkeypatch):
    real = export.importlib.util.find_spec
    monkeypatch.setattr(
        export.importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a)
    )
    with pytest.raises(CprError, match="pip install torch$"):
        export.build_export(export.bundled_model_dir(), tmp_path / "x")


# ---- numpy RCVNet against torch -------------------------------------------------------


def test_numpy_forward_equals_torch_forward():
    torch = pytest.importorskip("torch")
    from cpr_neo4j.model.rcvnet_torch import RCVNet

    for config in (RCVConfig(), RCVConfig(hidden=8, cond_hidden=4, layers=2)):
        weights = random_weights(1, config)
        weights = weights.replace({"out.weight": weights.params["out.weight"] * 20})  # Delta ~ 1
        net = RCVNet.from_weights(weights).eval()
        rng = np.random.default_rng(2)
        x = rng.uniform(-1, 1, size=(50, 3)).astype(np.float32)
        c = unit_blocks(rng, 50, config.c_dim // 384)
        with torch.no_grad():
            want = net(torch.from_numpy(x), torch.from_numpy(c)).numpy()
        assert np.abs(want).max() > 0.3  # a real signal, not zeros
        assert np.abs(weights.forward(x, c) - want).max() < 1e-5
        assert RCVWeights.from_module(net).params.keys() == weights.params.keys()


def test_scorer_backends_agree():
    pytest.importorskip("torch")
    weights = random_weights(3)
    rho = {"directed_by": 0.9}
    fast = PathScorer(FakeEncoder(), {}, rho, weights)
    ref = PathScorer(FakeEncoder(), {}, rho, weights, backend="torch")
    assert (fast.backend, fast.device, ref.backend, ref.device) == ("numpy", "cpu", "torch", "cpu")
    paths = [(D,), (A,), (A, D), (D, A, G), (G, A)]
    for text in ("who directed ENT", "what genres are the films starred by ENT"):
        a, b = fast.score(fast.question(text), paths), ref.score(ref.question(text), paths)
        assert np.abs(a - b).max() < 1e-5 and not np.allclose(
            a, fast.v_sem(fast.question(text), paths)
        )
        x, c = fast.features(fast.question(text), paths)
        assert np.abs(fast.v_sem(fast.question(text), paths) + x[:, 0] + x[:, 1]).max() < 1e-6
        assert np.abs(a + x[:, 0] + x[:, 1] - weights.forward(x, c)).max() < 1e-5
    late = PathScorer(FakeEncoder(), {}, rho)  # rows first, net after: projections caught up
    q = "who directed ENT"
    late.score(late.question(q), paths)
    late.net = weights
    assert (
        np.abs(late.score(late.question(q), paths) - fast.score(fast.question(q), paths)).max()
        < 1e-6
    )
    assert late.model_id == fast.model_id == ref.model_id
    with pytest.raises(ValueError):
        PathScorer(FakeEncoder(), {}, device="cuda", backend="numpy")


def test_a_path_costs_the_same_alone_or_in_any_batch():
    """Calibration scores a path inside big batches, a later ask in others, maybe with other
    threads: bit for bit the same on every BLAS kernel, as every product is exact up to one
    rounding (model.exact; .ci/run repeats this under other OpenBLAS core types)."""
    steps = [D, A, G, Step("written_by", False)]
    paths = [(s,) for s in steps] + [(s, t) for s in steps for t in steps]
    paths += [(s, t, u) for s in steps for t in steps for u in steps]
    weights = random_weights(6)
    weights = weights.replace({"out.weight": weights.params["out.weight"] * 20})
    q = "who directed the films written by ENT"
    a = PathScorer(FakeEncoder(), {}, {"directed_by": 0.8}, weights)
    batch = a.score(a.question(q), paths)
    b = PathScorer(FakeEncoder(), {}, {"directed_by": 0.8}, weights)
    for p in reversed(paths):  # other rows, other batches
        b.path_rows([p])
    with threads.limited(1):
        single = np.concatenate([b.score(b.question(q), [p]) for p in paths])
    assert np.array_equal(batch, single)
    big = [paths[i] for i in np.random.default_rng(0).integers(0, len(paths), 1024)]
    c = PathScorer(FakeEncoder(), {}, {"directed_by": 0.8}, weights)  # computes, not cached
    assert np.array_equal(c.score(c.question(q), big), batch[[paths.index(p) for p in big]])


def test_a_cached_cost_is_the_computed_one_and_a_new_net_drops_them():
    """The scorer keeps each (question, path) cost it computed with its net (model.costs):
    a later batch mixing known and new pairs gets the bits a fresh scorer computes, and new
    weights never see the old net's costs."""
    steps = [D, A, G]
    paths = [(s,) for s in steps] + [(s, t) for s in steps for t in steps]
    w1, w2 = random_weights(7), random_weights(8)
    qs = ("who directed ENT", "what genres are the films starred by ENT")
    warm = PathScorer(FakeEncoder(), {}, {"has_genre": 0.3}, w1)
    for text in qs:
        warm.score(warm.question(text), paths[::2])  # half of them cached
    for text in qs:
        fresh = PathScorer(FakeEncoder(), {}, {"has_genre": 0.3}, w1)
        got = warm.score(warm.question(text), paths)
        assert np.array_equal(got, fresh.score(fresh.question(text), paths))
    warm.net = w2
    other = PathScorer(FakeEncoder(), {}, {"has_genre": 0.3}, w2)
    got = warm.score(warm.question(qs[0]), paths)
    assert np.array_equal(got, other.score(other.question(qs[0]), paths))
    assert not np.array_equal(got, fresh.score(fresh.question(qs[0]), paths))
    warm.costs.limit = 5  # full: dropped, refilled
    got = warm.score(warm.question(qs[1]), paths)
    assert np.array_equal(got, other.score(other.question(qs[1]), paths))
    assert len(warm.costs) <= len(paths)


def pairs(n: int = 96) -> list[PathPair]:
    chains = {
        "who directed the movies starred by ENT": ((A, D), (A, G)),
        "what genres are the films directed by ENT": ((Step("directed_by", False), G), (A, D)),
        "who starred in ENT": ((A,), (D,)),
    }
    out = []
    for i in range(n):
        text, (pos, neg) = list(chains.items())[i % len(chains)]
        ents = tuple(f"e{j}" for j in range(len(pos)))
        out.append(
            PathPair(i, text, EntityPath("t", pos, ents), EntityPath("t", neg, ents[: len(neg)]))
        )
    return out


def test_trained_model_id_is_the_torch_side_hash_and_survives_npz(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from cpr_neo4j.model.rcvnet_torch import RCVNet, state_digest
    from cpr_neo4j.model.store import load_scorer, save_scorer
    from cpr_neo4j.model.train import pairwise_accuracy, train_rcvnet

    monkeypatch.setenv("CPR_HOME", str(tmp_path))
    scorer = PathScorer(FakeEncoder(), {}, {"directed_by": 0.7})
    report = train_rcvnet(
        scorer, pairs(), epochs=2, batch_size=32, seed=4, progress=False, device="cpu"
    )
    assert report.device == "cpu" and report.accuracy_trained >= report.accuracy_vsem
    net = RCVNet.from_weights(scorer.net)
    digest = hashlib.sha256(json.dumps(scorer.identity(), sort_keys=True).encode())
    state_digest(net, digest)  # what training computes from its torch state_dict
    assert scorer.model_id == f"rcv-{digest.hexdigest()[:16]}"
    again = PathScorer(FakeEncoder(), {}, {"directed_by": 0.7})
    train_rcvnet(again, pairs(), epochs=2, batch_size=32, seed=4, progress=False, device="cpu")
    assert again.model_id == scorer.model_id  # deterministic for a seed
    folder = save_scorer(scorer, dataset="toy")
    assert (folder / "weights.npz").exists() and not (folder / "weights.pt").exists()
    loaded = load_scorer(scorer.model_id, encoder=FakeEncoder())
    assert loaded.model_id == scorer.model_id and loaded.backend == "numpy"
    assert pairwise_accuracy(loaded, pairs()) == report.accuracy_trained


def test_weights_npz_round_trip_and_refusals(tmp_path, monkeypatch):
    weights = random_weights(5)
    weights.save(tmp_path / "w.npz")
    back = RCVWeights.load(tmp_path / "w.npz")
    assert back.params.keys() == weights.params.keys()
    assert all(np.array_equal(back.params[k], weights.params[k]) for k in weights.params)
    assert all(a.dtype == np.float32 and a.flags.c_contiguous for a in back.params.values())
    assert not back.params["out.weight"].flags.writeable
    digests = [hashlib.sha256(), hashlib.sha256()]
    weights.digest_into(digests[0]), back.digest_into(digests[1])
    assert digests[0].digest() == digests[1].digest()
    with pytest.raises(ValueError, match="shape"):
        RCVWeights(weights.params, RCVConfig(hidden=8))
    monkeypatch.setenv("CPR_HOME", str(tmp_path))
    from cpr_neo4j.model.store import load_scorer, save_scorer

    scorer = PathScorer(FakeEncoder(), {}, {}, weights)
    folder = save_scorer(scorer)
    (folder / "weights.npz").write_bytes(b"not a zip")
    with pytest.raises(CprError, match="cannot read"):
        load_scorer(scorer.model_id, encoder=FakeEncoder())
    (folder / "weights.npz").unlink()
    (folder / "weights.pt").write_bytes(b"old")
    with pytest.raises(CprError, match="older weights.pt"):
        load_scorer(scorer.model_id, encoder=FakeEncoder())


# ---- processes and threads ----------------------------------------------------------


def test_forked_workers_open_their_own_session(in_home):
    from cpr_neo4j.model.encoder import TextEncoder
    from cpr_neo4j.stages.workers import run_shares

    enc = TextEncoder()
    text = "who acted in the films directed by ENT"
    mine = enc.encode([text], cache=False)
    parent, before = os.getpid(), threads.threads()

    def job(share, shares, tick):
        vec = enc.encode([text], cache=False)
        return os.getpid(), enc._embedder._opened, vec

    results = run_shares(job, 2, lambda _: None)
    assert len(results) == 2 and results[0][0] == parent and results[1][0] != parent
    for pid, opened, vec in results:
        assert opened == (pid, 1)  # its own process, one thread while the shares run
        assert np.array_equal(vec, mine)
    assert threads.threads() == before  # restored after


def test_threads_setting_is_scoped():
    before = threads.threads()
    with threads.limited(1):
        assert threads.threads() == 1
    assert threads.threads() == before


def test_set_threads_limits_blas_even_before_numpy_is_imported():
    """threadpoolctl limits only the BLAS libraries already loaded: set_threads called first
    thing in a process (as a server or a script does) must still reach numpy's OpenBLAS."""
    probe = (
        "import json, threadpoolctl\n"
        "from cpr_neo4j.model.threads import set_threads\n"
        "set_threads(1)\n"
        "print(json.dumps([i['num_threads'] for i in threadpoolctl.threadpool_info()"
        " if i['user_api'] == 'blas']))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "CPR_THREADS")}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts and all(c == 1 for c in counts), out.stdout


def test_scorers_of_a_model_share_costs_by_text_not_by_row(monkeypatch):
    """`cpr serve`'s pool hands every scorer of a model one cost cache; their tables number
    questions and paths in their own order, so a shared cost is found by text and path."""
    from cpr_neo4j.model import store
    from cpr_neo4j.serve.cache import ScorerPool

    weights = random_weights(9)
    monkeypatch.setattr(store, "load_scorer", lambda *a: PathScorer(FakeEncoder(), {}, {}, weights))
    pool = ScorerPool(per_model=2)
    monkeypatch.setattr(pool, "encoder", lambda: None)
    paths = [(D,), (A, D), (D, A, G), (G,)]
    with pool.lease("m") as a, pool.lease("m") as b:
        assert a is not b and a.costs is b.costs
        b.score(b.question("what did ENT write"), paths[::-1])  # other rows first
        b.score(b.question("who directed ENT"), paths[:2])
        assert len(b.costs) == 6
        got = a.score(a.question("who directed ENT"), paths)  # half of it b's
    fresh = PathScorer(FakeEncoder(), {}, {}, weights)
    assert np.array_equal(got, fresh.score(fresh.question("who directed ENT"), paths))
    assert len(fresh.costs) == len(paths) and fresh.costs is not a.costs
