"""A path alone vs inside a batch of 1,024, per OpenBLAS core type, in surprisal units.

    python experiments/batch_invariance.py
        [--cores default,Haswell,Sandybridge,Prescott,Zen,SkylakeX]
        [--paths 1024] [--temperature 0.02]

For each core type a child process (OPENBLAS_CORETYPE=...) scores 1,024 relation paths of
one question in one batch, then each path alone in a fresh scorer with one BLAS thread, with
the numpy scorer as it ships (exact products, model.exact) and with the float32 BLAS forward
it replaced ("before"). Embeddings are deterministic vectors per text (no ONNX Runtime: the
encoder is checked apart, tests/test_backend.py) and the net has torch's init scale with a
20x output layer. Printed per core type: the kernel OpenBLAS picked (a child that dies, e.g.
SIGILL for a kernel this CPU cannot execute, is reported so), the largest |cost difference|,
the largest |surprisal difference| when the 1,024 paths are one question's candidate
sequences at temperature T (and the bound 2 max|dc| / T), against the cut's smallest slack
TOLERANCE x (1 + |tau|) at tau = 0 (the shipped surprisal taus lie in [0, 2]: slack 1e-4 to
3e-4); then the largest difference between core types, and the net's forward CPU time,
exact / float32 BLAS, for 1,024 rows and for one row (one BLAS thread).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.conformal.threshold import TOLERANCE  # noqa: E402
from cpr_neo4j.model import threads  # noqa: E402
from cpr_neo4j.model.rcvnet import RCVConfig, RCVWeights  # noqa: E402
from cpr_neo4j.model.scorer import PathScorer  # noqa: E402
from cpr_neo4j.search.base import Step  # noqa: E402

CORES = "default,Haswell,Sandybridge,Prescott,Zen,SkylakeX"
RELATIONS = ["directed_by", "starred_actors", "written_by", "has_genre", "release_year",
             "in_language", "has_tags", "has_imdb_rating", "has_imdb_votes"]  # fmt: skip
QUESTION = "who directed the films written by ENT"


class Encoder:
    model_name = "bench-vectors"

    def encode(self, texts, cache=True):
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=384)
            out[i] = v / np.linalg.norm(v)
        return out


def weights() -> RCVWeights:
    cfg = RCVConfig()
    rng, shapes = np.random.default_rng(6), cfg.shapes()
    fan = {k: shapes[k.rsplit(".", 1)[0] + ".weight"][1] for k in shapes}
    params = {k: rng.uniform(-1, 1, size=s) / np.sqrt(fan[k]) for k, s in shapes.items()}
    params["out.weight"] = params["out.weight"] * 20
    return RCVWeights(params, cfg)


def paths(n: int) -> list:
    steps = [Step(r, f) for r in RELATIONS for f in (True, False)]
    rng, out = np.random.default_rng(0), {}
    while len(out) < n:
        p = tuple(steps[i] for i in rng.integers(0, len(steps), int(rng.integers(1, 4))))
        out[p] = None
    return list(out)


def legacy(net: RCVWeights, q, s, p, rho) -> np.ndarray:
    """The float32 BLAS forward as shipped before model.exact (rows @ w; one row padded to
    two; einsum dot products)."""

    def mm(rows, w):
        return (np.repeat(rows, 2, axis=0) @ w)[:1] if len(rows) == 1 else rows @ w

    prm = net.params
    t = {k: np.ascontiguousarray(v.T) for k, v in prm.items() if k.endswith("weight")}
    w0, d = t["conditioner.0.weight"], 384
    x = np.stack([np.einsum("ij,ij->i", q, s), np.einsum("ij,ij->i", q, p), rho], 1)
    x = x.astype(np.float32)
    pre = mm(q, w0[:d]) + mm(s, w0[d : 2 * d]) + (mm(p, w0[2 * d :]) + prm["conditioner.0.bias"])
    rows = len(x)
    if rows == 1:
        x, pre = np.repeat(x, 2, 0), np.repeat(pre, 2, 0)
    cond = mm(np.maximum(pre, 0), t["conditioner.2.weight"]) + prm["conditioner.2.bias"]
    film, h = cond.reshape(len(x), 3, 2, 256), x
    for i in range(3):
        z = mm(h, t[f"hidden.{i}.weight"]) + prm[f"hidden.{i}.bias"]
        h = np.maximum(z * (1 + film[:, i, 0]) + film[:, i, 1], 0)
    delta = np.einsum("ij,j->i", h, prm["out.weight"][0]) + prm["out.bias"][0]
    return (-(x[:, 0] + x[:, 1]) + delta)[:rows]


def child(n: int) -> dict:
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
    net, ps, rho = weights(), paths(n), {"directed_by": 0.8}
    a = PathScorer(Encoder(), {}, rho, net)
    after = a.score(a.question(QUESTION), ps)
    b = PathScorer(Encoder(), {}, rho, net)
    with threads.limited(1):
        alone = np.concatenate([b.score(b.question(QUESTION), [p]) for p in ps])
    q_row = a.question(QUESTION).row
    rows = a.path_rows(ps)
    tab = a.tables()
    q, s = tab["q"][np.full(n, q_row)], tab["steps"][tab["path_last"][rows]]
    p, r = tab["paths"][rows], tab["step_rho"][tab["path_last"][rows]]
    before = legacy(net, q, s, p, r)
    with threads.limited(1):
        before_alone = np.concatenate([legacy(net, *(v[i : i + 1] for v in (q, s, p, r)))
                                       for i in range(n)])  # fmt: skip
        x, pre = a.features_rows(np.full(n, q_row), rows)[0], np.zeros((n, 256), np.float32)
        pre[:] = np.random.default_rng(1).normal(size=pre.shape)
        speed = {}  # CPU seconds (one BLAS thread): robust to other load on the machine
        for name, f, reps in (
            ("exact", lambda: net.head(x, pre), 5),
            ("float32", lambda: legacy_head(net, x, pre), 5),
            ("exact1", lambda: net.head(x[:1], pre[:1]), 200),
            (
                "float32_1",
                lambda: legacy_head(net, np.repeat(x[:1], 2, 0), np.repeat(pre[:1], 2, 0)),
                200,
            ),
        ):
            f()
            t0 = time.process_time()
            for _ in range(reps):
                f()
            speed[name] = (time.process_time() - t0) / reps
    return {
        "arch": blas[0]["architecture"] if blas else "?",
        "after": after.tolist(), "after_alone": alone.tolist(),
        "before": before.tolist(), "before_alone": before_alone.tolist(),
        "speed": speed,
    }  # fmt: skip


def legacy_head(net: RCVWeights, x, pre):
    prm = net.params
    t = {k: np.ascontiguousarray(v.T) for k, v in prm.items() if k.endswith("weight")}
    cond = np.maximum(pre, 0) @ t["conditioner.2.weight"] + prm["conditioner.2.bias"]
    film, h = cond.reshape(len(x), 3, 2, 256), x
    for i in range(3):
        z = h @ t[f"hidden.{i}.weight"] + prm[f"hidden.{i}.bias"]
        h = np.maximum(z * (1 + film[:, i, 0]) + film[:, i, 1], 0)
    return np.einsum("ij,j->i", h, prm["out.weight"][0]) + prm["out.bias"][0]


def surprisal(costs, temperature: float) -> np.ndarray:
    """-log softmax(-c / T): each path one answer's only sequence (search.answers' score)."""
    z = -(np.asarray(costs, float) - np.min(costs)) / temperature
    return -(z - np.log(np.exp(z).sum()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", default=CORES)
    ap.add_argument("--paths", type=int, default=1024)
    ap.add_argument("--temperature", type=float, default=0.02)  # the fitting grid's smallest
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.paths)))
        return
    t, slack = args.temperature, TOLERANCE * (1 + 0.0)
    print(f"{args.paths} paths of one question; T = {t}; cut slack at tau = 0: {slack:g}")
    print("core type    kernel       | before: max|dc|  max|ds|   | after: max|dc|  max|ds|"
          "  2max|dc|/T  /slack | exact/float32 CPU time, 1,024 rows (1 row)")  # fmt: skip
    runs = {}
    for core in args.cores.split(","):
        env = dict(os.environ)
        env.pop("OPENBLAS_CORETYPE", None)
        if core != "default":
            env["OPENBLAS_CORETYPE"] = core
        cmd = [sys.executable, __file__, "--child", "--paths", str(args.paths)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{core:12} cannot run here (exit {done.returncode}): "
                  f"{(done.stderr.strip().splitlines() or [''])[-1][:80]}")  # fmt: skip
            continue
        r = runs[core] = json.loads(done.stdout.strip().splitlines()[-1])
        row = []
        for k in ("before", "after"):
            c, c1 = np.array(r[k]), np.array(r[k + "_alone"])
            row += [np.abs(c - c1).max(), np.abs(surprisal(c, t) - surprisal(c1, t)).max()]
        bound = 2 * row[2] / t
        sp = r["speed"]
        ratio = sp["exact"] / sp["float32"]
        one = sp["exact1"] / sp["float32_1"]
        print(f"{core:12} {r['arch']:12} | {row[0]:14.3g} {row[1]:9.3g} | {row[2]:13.3g} "
              f"{row[3]:8.3g} {bound:11.3g} {bound / slack:7.3g} | {ratio:.2f} "
              f"({one:.2f})")  # fmt: skip
    if runs:
        ref = next(iter(runs))
        for k in ("before", "after"):
            base = np.array(runs[ref][k])
            worst = max(np.abs(np.array(r[k]) - base).max() for r in runs.values())
            print(f"{k}: largest cost difference between core types (vs {ref}): {worst:.3g}")


if __name__ == "__main__":
    main()
