"""Scoring without torch, checked against the torch path it replaces.

    python bench/backend_check.py [--model ID] [--questions 200] [--cal-questions N]
        [--encoder-home DIR] [--repeats 3] [--no-timings] [--no-model] [--out FILE]

(a) the ONNX export's probe check: how many texts, the largest |ONNX - sentence-transformers|
    over their embedding components;
(b) cold processes, ONNX Runtime encoder vs sentence-transformers: import + load, the first
    encode, the whole process, and one question's encode once warm (medians of --repeats);
(c) one trained model (default: the newest CPR model of metaqa on the server of $CPR_HOME,
    used read only) scored twice with the same weights: torch RCVNet + sentence-transformers
    (the old path) and numpy + ONNX (the new one). TreeG on a seeded sample of MetaQA test
    questions: largest cost difference over the candidates both keep, whether they keep the
    same candidates and rank the answers identically; then split-conformal taus over the
    centred nonconformity scores (centre 0.97, topics linked from the text as `cpr
    calibrate` links them) of the model's calibration share, from both paths. Seconds: all
    (the first path also fills the shared neighbour cache) and inside the scorer.
A model saved before weights.npz (weights.pt only, the old encoder id) is read with torch
here. The export is built into --encoder-home (default: $CPR_HOME) when it is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.config import cpr_home  # noqa: E402
from cpr_neo4j.model import export  # noqa: E402
from cpr_neo4j.model.rcvnet import RCVConfig, RCVWeights  # noqa: E402
from cpr_neo4j.model.scorer import PathScorer  # noqa: E402
from cpr_neo4j.stages.linked import link_readings  # noqa: E402

DATASET = "metaqa"
# the calibration being compared: centred nonconformity scores (stages/calibrate.py before
# score families), split-conformal taus at these alphas
CENTRE = 0.97
ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
QUESTION = "which movies did ENT direct"
COLD = {
    "onnx": """
from cpr_neo4j.model.encoder import TextEncoder
enc = TextEncoder()
loaded = time.perf_counter()
enc.encode([{q!r}])
""",
    "sentence-transformers": """
import os
os.environ["HF_HUB_OFFLINE"] = "1"
from sentence_transformers import SentenceTransformer
from cpr_neo4j.model.encoder import bundled_model_dir
model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
enc = type("E", (), {{"encode": lambda self, t, cache=False: model.encode(
    t, normalize_embeddings=True, show_progress_bar=False)}})()
loaded = time.perf_counter()
enc.encode([{q!r}])
""",
}
COLD_WRAP = """
import json, sys, time
began = time.perf_counter()
{body}
first = time.perf_counter()
one = []
for i in range(21):
    t = time.perf_counter()
    enc.encode([f"which films did ENT write in {{1950 + i}}"], cache=False)
    one.append(time.perf_counter() - t)
print(json.dumps({{"load": loaded - began, "first": first - loaded, "one": sorted(one)[10]}}))
"""


@contextmanager
def home_for_encoder(home: Path):
    """CPR_HOME pointed at `home` while the encoder finds (or builds) its export."""
    before = os.environ.get("CPR_HOME")
    os.environ["CPR_HOME"] = str(home)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CPR_HOME", None)
        else:
            os.environ["CPR_HOME"] = before


def embedding_check(encoder_home: Path) -> dict:
    with home_for_encoder(encoder_home):
        manifest = export.installed()
        texts, diff = export.probe_check()
    return {"texts": len(texts), "max_abs_diff": diff, "tolerance": export.TOLERANCE,
            "encoder": manifest["encoder_id"]}  # fmt: skip


def cold_timings(encoder_home: Path, repeats: int) -> dict:
    out = {}
    env = dict(os.environ, CPR_HOME=str(encoder_home))
    for name, body in COLD.items():
        runs = []
        for _ in range(repeats):
            code = COLD_WRAP.format(body=body.format(q=QUESTION))
            began = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
            )
            wall = time.perf_counter() - began
            runs.append({**json.loads(done.stdout.strip().splitlines()[-1]), "process": wall})
        out[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return out


class StEncoder:
    """The encoder as it was: sentence-transformers, cache by text (model.encoder before)."""

    dim = 384

    def __init__(self, model_name: str):
        os.environ["HF_HUB_OFFLINE"] = "1"
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.model = SentenceTransformer(str(export.bundled_model_dir()), device="cpu")
        self.model_name = model_name
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts, cache: bool = True) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        found = {}
        if missing:
            vectors = self.model.encode(
                missing, batch_size=256, convert_to_numpy=True, normalize_embeddings=True,
                show_progress_bar=False,
            ).astype(np.float32)  # fmt: skip
            found = dict(zip(missing, vectors, strict=True))
            if cache:
                self._cache.update(found)
        if not texts:
            return np.zeros((0, 384), np.float32)
        return np.stack([found[t] if t in found else self._cache[t] for t in texts])


def read_weights(folder: Path, config: dict) -> RCVWeights | None:
    if config.get("net") is None:
        return None
    net = RCVConfig(**config["net"])
    if (folder / "weights.npz").exists():
        return RCVWeights.load(folder / "weights.npz", net)
    import torch  # an older model: weights.pt (torch.save of the state_dict)

    state = torch.load(folder / "weights.pt", map_location="cpu", weights_only=True)
    return RCVWeights({k: v.numpy() for k, v in state.items()}, net)


def scorers(model_id: str, encoder_home: Path) -> tuple[dict, PathScorer, PathScorer, str]:
    from cpr_neo4j.model.encoder import TextEncoder

    folder = cpr_home() / "models" / model_id
    config = json.loads((folder / "config.json").read_text())
    weights = read_weights(folder, config)
    rt, rho = config["relation_text"], config["rho"]
    old = PathScorer(StEncoder(config["encoder"]), rt, rho, weights, backend="torch")
    with home_for_encoder(encoder_home):
        new = PathScorer(TextEncoder(), rt, rho, weights)
    if config["encoder"] == new.encoder.model_name:
        note = f"model id {'verified' if new.model_id == model_id else 'MISMATCH'}"
    else:
        note = f"trained with encoder {config['encoder']}; now {new.encoder.model_name}"
    return config, old, new, note


def timed(scorer: PathScorer) -> list[float]:
    """Wrap the scorer's entry points; the returned cell accumulates seconds spent in them."""
    spent = [0.0]
    for name in ("score", "v_sem", "questions", "similarity"):
        fn = getattr(scorer, name)

        def wrapper(*a, _fn=fn, **k):
            t = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t

        setattr(scorer, name, wrapper)
    return spent


def split_differences(config, old, new, test, found) -> dict:
    """Where the old/new cost differences come from, on the test candidates: the forward
    alone (numpy vs torch on the same sentence-transformers embeddings), and the new path
    recomputed (a fresh scorer: rows embedded in another order and batches, one path per
    call, one thread), the noise a calibration and a later ask may differ by."""
    from cpr_neo4j.model import threads

    rt, rho, weights = config["relation_text"], config["rho"], old.net
    st_numpy = PathScorer(old.encoder, rt, rho, weights)
    fresh = PathScorer(new.encoder, rt, rho, weights)
    cands = [[c.path for c in r.candidates()] for r in found]
    every = sorted({p for paths in cands for p in paths}, key=str)
    random.Random(1).shuffle(every)
    forward = recompute = 0.0
    with threads.limited(1):
        for i in range(0, len(every), 7):
            fresh.path_rows(every[i : i + 7])
        for q, paths in zip(test, cands, strict=True):
            if not paths:
                continue
            ref = old.score(old.question(q.masked), paths)
            forward = max(
                forward, np.abs(ref - st_numpy.score(st_numpy.question(q.masked), paths)).max()
            )
            batch = new.score(new.question(q.masked), paths)
            ctx = fresh.question(q.masked)
            single = np.concatenate([fresh.score(ctx, [p]) for p in paths])
            recompute = max(recompute, np.abs(batch - single).max())
    return {"forward_only_diff": float(forward), "recompute_diff": float(recompute)}


def compare_retrieval(pairs) -> dict:
    """pairs: (old Retrieval, new Retrieval) per question."""
    worst, rel, same_cands, same_rank, near_ties = 0.0, 0.0, 0, 0, 0
    for old, new in pairs:
        a = {c.path: c.cost for c in old.candidates()}
        b = {c.path: c.cost for c in new.candidates()}
        for p in a.keys() & b.keys():
            worst = max(worst, abs(a[p] - b[p]))
            rel = max(rel, abs(a[p] - b[p]) / max(1.0, abs(a[p])))
        same_cands += a.keys() == b.keys()
        ra, rb = old.ranked_answers(), new.ranked_answers()
        if [e for e, _ in ra] == [e for e, _ in rb]:
            same_rank += 1
        elif sorted(e for e, _ in ra) == sorted(e for e, _ in rb):  # same answers, order moved
            costs = sorted(c for _, c in ra)
            near_ties += bool(np.min(np.diff(costs), initial=np.inf) < 1e-5)
    n = len(pairs)
    return {"questions": n, "max_cost_diff": worst, "max_rel_diff": rel,
            "same_candidates": same_cands,
            "same_ranking": same_rank, "reordered_near_ties": near_ties}  # fmt: skip


def model_check(args) -> dict:
    from cpr_neo4j.conformal import threshold as threshold_mod
    from cpr_neo4j.conformal.threshold import centred, nonconformity
    from cpr_neo4j.graph import records
    from cpr_neo4j.graph.neighbours import Neo4jNeighbours
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.graph.subgraphs import SUBGRAPH, resolve_scope
    from cpr_neo4j.search.adjacency_cache import CachedAdjacency
    from cpr_neo4j.stages import calibrate as cal_stage
    from cpr_neo4j.stages import questions as qsel
    from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever

    with GraphStore() as store:  # reads only
        model_id = cal_stage.resolve_model(store, DATASET, args.model)
        config, old, new, note = scorers(model_id, args.encoder_home)
        meta = config["meta"]
        scope = resolve_scope(store, DATASET, meta.get("scope"))
        settings = RetrievalSettings(
            hops=meta["hops"], scope=scope, topic_answers=records.topic_answers(store, DATASET)
        )
        source = CachedAdjacency(Neo4jNeighbours(store, DATASET, settings.fanout_cap))
        test = sorted(
            qsel.load(store, DATASET, "test", meta.get("hops_filter")), key=lambda q: q.id
        )
        test = random.Random(0).sample(test, min(args.questions, len(test)))
        ids = set(meta["calibration_ids"])
        cal = qsel.load(store, DATASET, meta["split"], meta.get("hops_filter"), ids)
        cal = cal[: args.cal_questions] if args.cal_questions else cal
        linked = {q.id: link_readings(store, DATASET, q.text) for q in cal}
        linked = {k: v[0] if v else ([], "") for k, v in linked.items()}  # first reading
        accuracy = sum(set(linked[q.id][0]) == set(q.topics) for q in cal) / len(cal)
        asked = cal_stage.GOLD if scope == SUBGRAPH else cal_stage.AUTO
        mode = cal_stage.choose_linking(asked, accuracy)
        inputs = [linked[q.id] if mode == cal_stage.TEXT else (q.topics, q.masked) for q in cal]
        out: dict = {"model": model_id, "note": note, "linking": mode, "seconds": {}}
        runs: dict[str, tuple[list, list]] = {}
        for name, scorer in (("torch + sentence-transformers", old), ("numpy + onnx", new)):
            began, spent = time.perf_counter(), timed(scorer)
            ret = Retriever(store, DATASET, scorer, settings, source=source)
            scorer.questions([q.masked for q in test] + [m for t, m in inputs if t])
            found = [ret.run(q.masked, q.topics, q.text, q.id) for q in test]
            scores = []
            for q, (topics, masked) in zip(cal, inputs, strict=True):
                costs = ret.run(masked, topics, q.text, q.id).answer_costs() if topics else {}
                scores.append(nonconformity(centred(costs, CENTRE), q.answers))
            runs[name] = (found, scores)
            out["seconds"][name] = (round(time.perf_counter() - began, 1), round(spent[0], 1))
    (found_old, s_old), (found_new, s_new) = runs.values()
    out["test"] = compare_retrieval(list(zip(found_old, found_new, strict=True)))
    out["test"].update(split_differences(config, old, new, test, found_old))
    taus = {}
    for name, s in (("old", s_old), ("new", s_new)):
        with warnings.catch_warnings():  # an unattainable alpha is +inf, said by a warning
            warnings.simplefilter("ignore")
            taus[name] = {a: threshold_mod.conformal_threshold(np.sort(s), a) for a in ALPHAS}
    a, b = np.asarray(s_old, float), np.asarray(s_new, float)
    finite = np.isfinite(a) & np.isfinite(b)
    out["calibration"] = {
        "questions": len(cal),
        "same_finite": bool((np.isfinite(a) == np.isfinite(b)).all()),
        "max_score_diff": float(np.abs(a[finite] - b[finite]).max(initial=0.0)),
        "taus_old": taus["old"],
        "taus_new": taus["new"],
        "taus_equal": taus["old"] == taus["new"],
        "max_tau_diff": max(
            abs(taus["old"][k] - taus["new"][k]) for k in taus["old"] if np.isfinite(taus["old"][k])
        ),  # fmt: skip
    }
    # the cut every answer set uses: cost <= tau + eps (1 + |tau|)
    eps = getattr(threshold_mod, "TOLERANCE", None)
    if eps is not None:
        out["calibration"]["taus_within_eps"] = eps, all(
            abs(taus["old"][k] - taus["new"][k]) <= eps * (1 + abs(taus["old"][k]))
            for k in taus["old"] if np.isfinite(taus["old"][k])
        )  # fmt: skip
    return out


def report(res: dict) -> None:
    rows: list[tuple[str, str]] = []
    if "embedding" in res:
        e = res["embedding"]
        rows += [
            ("encoder", e["encoder"]),
            ("(a) probe texts / max |ONNX - ST|", f"{e['texts']} / {e['max_abs_diff']:.2e}"
             f" (tolerance {e['tolerance']:g})"),
        ]  # fmt: skip
    for name, t in res.get("cold", {}).items():
        rows.append((f"(b) cold {name}", f"import+load {t['load']:.2f} s, first encode "
                     f"{t['first'] * 1e3:.0f} ms, process {t['process']:.2f} s, one question "
                     f"warm {t['one'] * 1e3:.1f} ms"))  # fmt: skip
    if "model" in res:
        m = res["model"]
        t, c = m["test"], m["calibration"]
        rows += [
            ("(c) model", f"{m['model']} ({m['note']})"),
            ("    seconds: all, in the scorer", "; ".join(
                f"{k} {a} s, {b} s" for k, (a, b) in m["seconds"].items())),
            (f"    test: {t['questions']} questions", f"max cost diff {t['max_cost_diff']:.2e} "
             f"(relative to max(1, |V|) {t['max_rel_diff']:.1e}); "
             f"same candidates {t['same_candidates']}, same ranked answers {t['same_ranking']}"
             f" (+{t['reordered_near_ties']} reordered near-ties)"),
            ("    of which the forward alone", f"{t['forward_only_diff']:.2e} (numpy vs torch "
             "RCVNet on the same sentence-transformers embeddings)"),
            ("    new path recomputed", f"{t['recompute_diff']:.2e} (fresh scorer, other "
             "batches, one path per call, 1 thread)"),
            (f"    calibration: {c['questions']} ({m['linking']})",
             f"max score diff {c['max_score_diff']:.2e}; taus equal: {c['taus_equal']} "
             f"(max diff {c['max_tau_diff']:.2e})" + (
                 f"; within the cut's eps {c['taus_within_eps'][0]:g}: {c['taus_within_eps'][1]}"
                 if "taus_within_eps" in c else "")),
        ]  # fmt: skip
        for a in c["taus_old"]:
            rows.append(
                (f"    tau at alpha {a}", f"{c['taus_old'][a]:.6f} / {c['taus_new'][a]:.6f}")
            )
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="model id (default: the newest CPR model of metaqa)")
    ap.add_argument("--questions", type=int, default=200, help="MetaQA test questions")
    ap.add_argument("--cal-questions", type=int, default=0, help="first N of the share (0: all)")
    ap.add_argument("--encoder-home", type=Path, default=None, help="where the export lives")
    ap.add_argument("--repeats", type=int, default=3, help="cold processes per encoder")
    ap.add_argument("--no-timings", action="store_true")
    ap.add_argument("--no-model", action="store_true")
    ap.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args()
    args.encoder_home = args.encoder_home or cpr_home()
    res: dict = {"embedding": embedding_check(args.encoder_home)}
    if not args.no_timings:
        res["cold"] = cold_timings(args.encoder_home, args.repeats)
    if not args.no_model:
        res["model"] = model_check(args)
    report(res)
    if args.out:
        args.out.write_text(json.dumps(res, indent=2, default=str))


if __name__ == "__main__":
    main()
