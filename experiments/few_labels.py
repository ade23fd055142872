"""Training from few labels, with and without questions generated from the graph (issue 57,
item 3): one command runs the grid and writes a table.

    python experiments/few_labels.py --dataset metaqa-plain \\
        --out experiments/results/few_labels/metaqa-plain.json
    python experiments/few_labels.py --table experiments/results/few_labels/metaqa-plain.json

Protocol (deployed): one fixed set of real calibration questions, drawn once from the
training split (`--cal` of them, seed 1234), calibrates every model; the working half of
the test split (subsampled to `--max-test`, seed 0) is answered with each calibration, as
`cpr eval` does; nothing is tuned on either. For each size n in `--sizes` and each seed,
n real training questions are drawn (seeded by the seed) from the training split minus the
calibration set, and a model is trained on them alone and on them plus `--generated`
generated questions (training's seed = the same seed). n = 0 without generated questions
is Abl.1 (V_sem, no training), evaluated once (it has no training randomness; its
temperature is fitted on the seed-0 training questions of the largest size). "all": one
model a seed on every remaining training question (at most `--all-max` rolled out, sampled
by the seed).

`--dev N` chooses settings instead: N training questions are set aside (seed 4321) before
any is drawn to train on, recorded as each model's inner dev split, and `cpr eval --split
inner-dev` measures on them (half calibrates, half is answered, by question-id hash); the
test split is not read. `--generated fill` adds what `cpr train` adds by default
(stages/train.generated_count: now fill to 300; the results files made before it filled
to 1,000, and `--table` shows the count each made).

Every finished point is appended to the JSON at once, so a run cut short keeps what it
measured and a rerun skips the points already there. `--table` prints the markdown table
of one or more files (a row per size, count and mix of generated questions): mean over the
seeds run (and their count), min-max in brackets.

`--real-share S` repeats the real questions' pairs to at least S of the training pairs;
`--anchor-real` keeps the anchor term (the shared cost scale) to real questions' pairs;
`--llm-url` paraphrases the generated questions (experiments/paraphrase_check.py first).
`--pick kmeans` labels the questions nearest the centres of a seeded k-means (k = size) of
the pool's masked questions instead of a random draw; `--pick cover` the first `size` of a
greedy facility-location order (covering_order) over a seeded log of `--pick-pool`
questions. Calibration and inner dev questions stay random either way. (An ensemble of nets
and word dropout were measured with this script at e8fdf4a and removed: docs/method.md.)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ALPHAS = (0.05, 0.1, 0.3, 0.5)
CAL_SEED = 1234
DEV_SEED = 4321
EPOCHS = 6  # `cpr train`'s
FILL = -1  # --generated fill: `cpr train`'s default count (stages/train.generated_count)


def _key(p: dict) -> str:
    return f"{p['size']}|{p['generated']}|{p['seed']}"


def _load(out: Path) -> list[dict]:
    if not out.exists():
        return []
    return [json.loads(x) for x in out.read_text().splitlines() if x.strip()]


def _evaluate(store, a, model_id: str, methods: tuple[str, ...], temperature=None) -> dict:
    """The deployed rows of `model_id` on the test split (the inner dev split with --dev);
    temperature: score CPR at this T instead of the model's (experiments/temperature_check)."""
    from cpr_neo4j.evaluation.eval_tables import INNER_DEV, TEST
    from cpr_neo4j.evaluation.evaluate import EvalSettings, run

    s = EvalSettings(
        a.dataset,
        alphas=ALPHAS,
        methods=methods,
        model_id=model_id,
        split=INNER_DEV if a.dev else TEST,
        max_questions=a.max_test,
        hop_level=False,
        variants=False,
        boot=a.boot,
        draws=20,  # pooled re-splits: a second view only, kept small
        linking="text",
        seed=0,
        workers=1,
        temperature=temperature,
    )
    res = run(store, s, say=lambda m: None).deployed
    out = {}
    for name in {r.method for r in res.rows}:
        if name not in ("CPR", "Abl.1 (V_sem)"):
            continue
        out[name] = {
            str(r.alpha): {
                "ecr": r.ecr,
                "apss": r.apss,
                "f1": r.metrics.get("f1") if isinstance(r.metrics, dict) else r.metrics.f1,
                "attainable": r.attainable,
                "hits1": r.metrics.get("hits1") if isinstance(r.metrics, dict) else r.metrics.hits1,
                # share of questions whose gold the beam reaches (a finite score): alpha
                # below 1 - recall_cal cannot be met by a finite threshold
                "recall_cal": r.recall_cal,
                "recall": r.recall,
            }
            for r in res.rows
            if r.method == name and r.risk == "coverage"
        }
    return {"n_cal": res.n_cal, "n_test": res.n_test, "methods": out}


def run_grid(a) -> None:
    from cpr_neo4j.config import Neo4jSettings
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.stages.train import TrainSettings, train
    from cpr_neo4j.training import questions as qsel

    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {_key(p) for p in _load(out)}
    sizes = [int(x) for x in a.sizes.split(",")]
    seeds = [int(x) for x in a.seeds.split(",")]
    with GraphStore(Neo4jSettings.load()) as store:
        split = qsel.training_split(store, a.dataset)
        pool = sorted(q.id for q in qsel.load(store, a.dataset, split, None))
        cal = sorted(random.Random(CAL_SEED).sample(pool, a.cal))
        rest = sorted(set(pool) - set(cal))
        dev: list[str] = []
        if a.dev:  # inner dev: training questions set aside before any is drawn to train on
            dev = sorted(random.Random(DEV_SEED).sample(rest, a.dev))
            rest = sorted(set(rest) - set(dev))

        def point(size, generated, seed, training_ids, max_questions, methods=("cpr",)):
            key = f"{size}|{generated}|{seed}"
            if key in done:
                return
            began = time.monotonic()
            if methods == ("abl1",):
                model_id = a._abl1_model
                trained = {}
            else:
                s = TrainSettings(
                    a.dataset,
                    calibration_ids=tuple(cal),
                    inner_dev_ids=tuple(dev),
                    training_ids=tuple(training_ids),
                    generated=None if generated == FILL else generated,
                    max_questions=max_questions,
                    rollouts=a.rollouts,
                    epochs=a.epochs,
                    seed=seed,
                    real_share=a.real_share,
                    anchor_generated=not a.anchor_real,
                    llm_url=a.llm_url,
                    llm_model=a.llm_model,
                )
                result = train(store, s)
                model_id, trained = result.model_id, result.figures
            ev = _evaluate(store, a, model_id, methods)
            row = {
                "size": size,
                "generated": generated,
                "seed": seed,
                "model_id": model_id,
                "trained": {k: v for k, v in trained.items() if not isinstance(v, list)},
                "seconds": round(time.monotonic() - began, 1),
                "settings": {
                    "cal": a.cal,
                    "max_test": a.max_test,
                    "rollouts": a.rollouts,
                    "epochs": a.epochs,
                    "dataset": a.dataset,
                    "dev": a.dev,
                    "real_share": a.real_share,
                    "anchor_real": a.anchor_real,
                    "pick": a.pick,
                    "pick_pool": a.pick_pool if a.pick == "cover" else None,
                    "llm_model": a.llm_model if a.llm_url else None,
                },  # fmt: skip
                **ev,
            }
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            done.add(key)
            print(f"{key}: {row['seconds']} s", flush=True)

        a._abl1_model = None
        for seed in seeds:  # one whole table per seed first: a cut-short run stays balanced
            for size in sizes:
                if a.pick == "cover":  # a user's log of --pick-pool questions, drawn by seed
                    log = sorted(random.Random(seed).sample(rest, min(a.pick_pool, len(rest))))
                    ids = _cover_pick(store, a.dataset, split, log, size)
                elif a.pick == "kmeans":
                    ids = _kmeans_pick(store, a.dataset, split, rest, size, seed)
                else:
                    ids = sorted(random.Random(seed).sample(rest, size))
                for generated in (0, a.generated) if size else (a.generated,):
                    point(size, generated, seed, ids, max(size, 1))
                if size == max(sizes) and seed == seeds[0] and a._abl1_model is None:
                    a._abl1_model = _latest(out, size, 0, seed)
            if a._abl1_model and "0|0|-1" not in done:
                point(0, 0, -1, [], 1, methods=("abl1",))
        if a.all:  # one model a seed, as every other row (its sample and training's seed)
            for seed in seeds:
                point("all", 0, seed, rest, a.all_max)


def covering_order(vectors, k: int) -> list[int]:
    """The first `k` questions to label for training, as indices into `vectors` (unit rows):
    greedy facility location, each pick the question that most raises sum_i max_{j picked}
    cos(i, j), so every prefix covers the kinds of question asked within 1 - 1/e of the best
    set of its size. Training questions may be chosen so; calibration ones may not."""
    import numpy as np

    sims = np.asarray(vectors, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32).T
    best = np.full(len(sims), -1.0, dtype=np.float32)
    order: list[int] = []
    for _ in range(min(k, len(sims))):
        gain = np.maximum(sims - best[:, None], 0).sum(axis=0)
        gain[order] = -1.0
        j = int(np.argmax(gain))
        order.append(j)
        best = np.maximum(best, sims[:, j])
    return order


def _masked_vectors(store, dataset, split, pool) -> tuple[list[str], object]:
    """The ids of `pool`'s questions and their masked texts' embeddings, in one order."""
    from cpr_neo4j.model.encoder import TextEncoder
    from cpr_neo4j.training import questions as qsel

    qs = qsel.load(store, dataset, split, None, set(pool))
    return [q.id for q in qs], TextEncoder().encode([q.masked for q in qs])


def _cover_pick(store, dataset, split, pool, size) -> list[str]:
    """The first `size` questions of `pool` in a covering order
    (covering_order on the masked questions' embeddings)."""
    ids, x = _masked_vectors(store, dataset, split, pool)
    return sorted(ids[i] for i in covering_order(x, size))


def _kmeans_pick(store, dataset, split, pool, size, seed) -> list[str]:
    """`size` questions of `pool` to label: the one nearest each centre of a seeded k-means
    (k = size) of the masked questions' embeddings, so the labels cover the kinds of
    question asked."""
    import numpy as np

    if not size:
        return []
    ids, x = _masked_vectors(store, dataset, split, pool)
    rng = np.random.default_rng(seed)
    centres = x[[int(rng.integers(len(x)))]]
    while len(centres) < size:  # k-means++ seeding
        d = np.clip(2 - 2 * np.max(x @ centres.T, axis=1), 0, None)  # unit vectors
        centres = np.vstack([centres, x[rng.choice(len(x), p=d / d.sum())]])
    for _ in range(20):
        near = np.argmax(x @ centres.T, axis=1)
        centres = np.stack([x[near == k].mean(0) if (near == k).any() else centres[k]
                            for k in range(size)])  # fmt: skip
    chosen: list[int] = []
    sims = x @ centres.T
    for k in range(size):
        for i in np.argsort(-sims[:, k]):
            if int(i) not in chosen:
                chosen.append(int(i))
                break
    return sorted(ids[i] for i in chosen)


def _latest(out: Path, size: int, generated: int, seed: int) -> str | None:
    for p in _load(out):
        if (p["size"], p["generated"], p["seed"]) == (size, generated, seed):
            return p["model_id"]
    return None


def _cell(points: list[dict], alpha: str, method: str) -> str:
    vals = [p["methods"][method][alpha] for p in points if method in p["methods"]]
    if not vals:
        return "-"
    att = [v for v in vals if v["attainable"]]
    if not att:
        return f"not attainable ({len(vals)})"

    def m(k: str) -> str:
        xs = [v[k] for v in att]
        mean = statistics.mean(xs)
        rng = f" [{min(xs):.2f}-{max(xs):.2f}]" if len(xs) > 1 else ""
        return f"{mean:.2f}{rng}" if k == "apss" else f"{mean:.3f}"

    note = "" if len(att) == len(vals) else f", attained in {len(att)} of {len(vals)}"
    return f"{m('ecr')} / {m('apss')} / {m('f1')}{note}"


def _count(gen: int, pts: list[dict]) -> str:
    """The generated count asked for; for `fill`, what `cpr train`'s rule made then (the
    rule changed once: fill to 1,000, then to 300)."""
    if gen != FILL:
        return str(gen)
    made = sorted({p["trained"].get("questions_generated") for p in pts})
    return f"fill ({', '.join(map(str, made))} made)"


def _abl1(p: dict) -> bool:
    """The point of Abl.1, the untrained scorer (no real, no generated question)."""
    return p["size"] == 0 and not p["generated"]


def _mix(p: dict, epochs: int) -> str:
    """How a point mixed generated with real questions, beyond the count ("" = as collected),
    and its epochs where they differ from the table's (`epochs`)."""
    s = p["settings"]
    parts: list[str] = []
    if _abl1(p):  # nothing trained
        return ""
    if p["generated"]:
        parts += [f"real pairs ≥ {s['real_share']}"] if s.get("real_share") else []
        parts += ["anchor on real only"] if s.get("anchor_real") else []
        parts += [f"paraphrased ({s['llm_model']})"] if s.get("llm_model") else []
    parts += [f"{s['epochs']} epochs"] if s.get("epochs", epochs) != epochs else []
    # levers of real and generated rows alike (the last two measured at e8fdf4a only)
    parts += [f"{s['pick']} pick"] if s.get("pick", "random") != "random" else []
    parts += [f"ensemble of {s['members']}"] if s.get("members", 1) != 1 else []
    parts += [f"word dropout {s['word_dropout']}"] if s.get("word_dropout") else []
    parts += [p["tag"]] if p.get("tag") else []
    return ", ".join(parts)


def table(*paths: Path, tags: list[str] | None = None) -> str:
    """One table over one or more results files of the same protocol: a row per (size,
    generated count, mix); a point in several files (the same model) counts once. `tags`:
    one per file, added to the mix of its generated rows (runs of different code)."""
    seen: set[tuple] = set()
    points = []
    for i, path in enumerate(paths):
        for p in _load(path):
            if tags and p["generated"]:
                p["tag"] = tags[i]
            # Abl.1 is the untrained scorer: one point however many runs evaluated it
            key = ("abl1",) if _abl1(p) else (p["model_id"], p["seed"])
            if key not in seen:
                seen.add(key)
                points.append(p)
    if not points:
        return "(no points)"
    first = points[0]
    groups: dict[tuple, list[dict]] = {}
    for p in points:
        key = (str(p["size"]), p["generated"], _mix(p, first["settings"]["epochs"]))
        groups.setdefault(key, []).append(p)
    mixes = any(k[2] for k in groups)
    lines = [
        f"{first['settings']['dataset']}: {first['n_cal']} calibration questions (the same "
        f"for every row), {first['n_test']} "
        + ("inner dev" if first["settings"].get("dev") else "test")
        + f" questions; rollouts "
        f"{first['settings']['rollouts']}, epochs {first['settings']['epochs']}. Each cell: "
        "ECR / APSS [min-max over seeds] / F1, mean over the seeds that attain alpha.",
        "",
        "| real training questions | generated | "
        + ("mix | " if mixes else "")
        + "seeds | "
        + " | ".join(f"α={a}" for a in ALPHAS)
        + " | Hits@1 |",
        "|---|---:|" + ("---|" if mixes else "") + "---:|" + "---:|" * (len(ALPHAS) + 1),
    ]

    def order(k):
        size, gen, mix = k
        return (1e9 if size == "all" else int(size), gen, mix)

    for size, gen, mix in sorted(groups, key=order):
        pts = groups[(size, gen, mix)]
        method = "Abl.1 (V_sem)" if size == "0" and gen == 0 else "CPR"
        label = "0 (Abl.1: V_sem)" if method != "CPR" else size
        hits = [p["methods"][method]["0.5"]["hits1"] for p in pts if method in p["methods"]]
        lines.append(
            f"| {label} | {_count(gen, pts)} | "
            + (f"{mix or ('as collected' if gen else '-')} | " if mixes else "")
            + f"{len(pts)} | "
            + " | ".join(_cell(pts, str(a), method) for a in ALPHAS)
            + f" | {statistics.mean(hits):.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="metaqa-plain")
    ap.add_argument("--out", default="experiments/results/few_labels/metaqa-plain.jsonl")
    ap.add_argument("--sizes", default="0,30,100,300")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument(
        "--generated",
        type=lambda v: FILL if v == "fill" else int(v),
        default=1000,
        help="generated questions added to each size's real ones, or 'fill' (cpr train's rule)",
    )
    ap.add_argument("--cal", type=int, default=1000)
    ap.add_argument("--max-test", type=int, default=1000)
    ap.add_argument("--rollouts", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument(
        "--dev",
        type=int,
        default=0,
        help="set this many training questions aside as an inner dev split and measure on it "
        "(half calibrates, half is measured, by question-id hash), not on the test split: "
        "for choosing settings",
    )
    ap.add_argument(
        "--real-share",
        type=float,
        default=None,
        help="repeat the real questions' pairs to at least this share of the training pairs",
    )
    ap.add_argument(
        "--anchor-real",
        action="store_true",
        help="the anchor term (shared cost scale) on real questions' pairs only",
    )
    ap.add_argument("--llm-url", help="paraphrase generated questions through this server")
    ap.add_argument("--llm-model", help="the model name the --llm-url server serves")
    ap.add_argument("--pick", choices=("random", "kmeans", "cover"), default="random")
    ap.add_argument("--pick-pool", type=int, default=1000, help="--pick cover's question log")
    ap.add_argument("--all", action="store_true", help="also the model on every question")
    ap.add_argument("--all-max", type=int, default=2000)
    ap.add_argument("--table", metavar="JSONL", nargs="+", help="print the table of results files")
    ap.add_argument(
        "--tags", nargs="+", help="with --table: a word per file, shown in its generated rows' mix"
    )
    a = ap.parse_args()
    if a.table:
        if a.tags and len(a.tags) != len(a.table):
            ap.error(f"--tags needs one tag per --table file ({len(a.table)}), got {len(a.tags)}")
        print(table(*map(Path, a.table), tags=a.tags))
        return
    run_grid(a)
    print(table(Path(a.out)))


if __name__ == "__main__":
    main()
