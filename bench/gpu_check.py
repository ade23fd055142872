"""GPU check: RCVNet training and path scoring on CUDA vs CPU, and relation hints from
in-process vLLM on the GPU vs llama.cpp's server on the CPU; prints the timings.

    python bench/gpu_check.py [--pairs 20000] [--epochs 3] [--llm MODEL_OR_PATH]

Self-contained (no graph, no dataset files): pairs are built from question templates
whose answer relation chain is known, against random other chains of the same length.
Hints: one batch of prompts (each template, masked, with its relations) through
VllmHints (needs the `llm` extra and a small instruct model already on the machine:
--llm, else $CPR_GPU_LLM, else the first *Instruct* model in the Hugging Face cache), then
the same prompts through the SmolLM2 llama.cpp server when the `llm-cpu` extra is there.
Exits 0 with a message when CUDA is not available; a missing vLLM or model skips hints.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.model.encoder import TextEncoder  # noqa: E402
from cpr_neo4j.model.rcvnet import RCVNet  # noqa: E402
from cpr_neo4j.model.scorer import PathScorer  # noqa: E402
from cpr_neo4j.model.train import train_rcvnet  # noqa: E402
from cpr_neo4j.search.base import Step  # noqa: E402
from cpr_neo4j.training.puct import EntityPath, PathPair  # noqa: E402

F, R = True, False
TEMPLATES = {
    "who directed the movies starred by ENT": [("starred_actors", R), ("directed_by", F)],
    "when were the films written by ENT released": [("written_by", R), ("release_year", F)],
    "what genres are the movies directed by ENT": [("directed_by", R), ("has_genre", F)],
    "who acted in the films directed by ENT": [("directed_by", R), ("starred_actors", F)],
    "which languages are the movies starred by ENT in": [("starred_actors", R), ("in_language", F)],
    "who wrote the films directed by ENT": [("directed_by", R), ("written_by", F)],
}
RELATIONS = sorted({r for chain in TEMPLATES.values() for r, _ in chain} | {"has_tags"})


def make_pairs(n: int, seed: int) -> list[PathPair]:
    rng = random.Random(seed)
    steps = [Step(r, f) for r in RELATIONS for f in (F, R)]
    items = list(TEMPLATES.items())
    pairs = []
    for i in range(n):
        text, chain = items[i % len(items)]
        pos = tuple(Step(r, f) for r, f in chain)
        neg = pos
        while neg == pos:
            neg = (*pos[:-1], rng.choice(steps))
        ents = tuple(f"e{j}" for j in range(len(pos)))
        pairs.append(PathPair(i, text, EntityPath("t", pos, ents), EntityPath("t", neg, ents)))
    return pairs


def check(device: str, encoder: TextEncoder, pairs: list[PathPair], epochs: int) -> None:
    scorer = PathScorer(encoder, {}, {}, RCVNet(), device=device)
    report = train_rcvnet(scorer, pairs, epochs=epochs, seed=0, progress=False)
    steps = epochs * -(-len(pairs) // 256)
    print(
        f"[{device}] train {len(pairs)} pairs x {epochs} epochs: {report.seconds:.2f} s "
        f"({steps / report.seconds:,.0f} steps/s), pairwise accuracy "
        f"{report.accuracy_vsem:.3f} -> {report.accuracy_trained:.3f}"
    )
    ctx = scorer.question(next(iter(TEMPLATES)))
    paths = [p.neg.relpath for p in pairs[:4096]] * 16  # 65,536 paths
    scorer.score(ctx, paths)
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(5):
        scorer.score(ctx, paths)
    if device == "cuda":
        torch.cuda.synchronize()
    rate = 5 * len(paths) / (time.perf_counter() - start)
    print(f"[{device}] score: {rate:,.0f} paths/s in batches of {len(paths):,}")
    assert report.accuracy_trained > report.accuracy_vsem, "training did not help"


def spread(encoder: TextEncoder, pairs: list[PathPair]) -> None:
    """The same trained weights scoring the same paths on the numpy CPU scorer and on CUDA:
    whether a calibration made on one serves asks on the other (the canary's question,
    stages/canary.py, at the cut's tolerance)."""
    from cpr_neo4j.conformal.threshold import TOLERANCE
    from cpr_neo4j.stages.canary import score_per_cost

    cpu = PathScorer(encoder, {}, {}, RCVNet(), device="cpu")
    train_rcvnet(cpu, pairs[:4096], epochs=1, seed=0, progress=False, device="cpu")
    gpu = PathScorer(encoder, {}, {}, cpu.net, device="cuda")
    worst = 0.0
    for q in TEMPLATES:
        paths = [p.neg.relpath for p in pairs[:2048]]
        a = cpu.score(cpu.question(q), paths).astype(float)
        b = gpu.score(gpu.question(q), paths).astype(float)
        worst = max(worst, float(abs(a - b).max()))
    move = worst * score_per_cost(None)  # in score units at the smallest fitted T
    verdict = "serves" if move <= TOLERANCE else "is refused by the canary: recalibrate on cuda"
    print(f"[cuda vs cpu] largest cost difference {worst:.3g}: a surprisal moves by up to "
          f"{move:.3g} at T = 0.02 (tolerance {TOLERANCE:g}): a CPU calibration "
          f"{verdict}")  # fmt: skip


def find_llm(given: str | None) -> str | None:
    """A small instruct model already here: no download is possible on a device machine."""
    if given or os.environ.get("CPR_GPU_LLM"):
        return given or os.environ["CPR_GPU_LLM"]
    hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    for folder in sorted(hub.glob("models--*Instruct*")):
        snaps = sorted((folder / "snapshots").glob("*"))
        if snaps:
            return str(snaps[-1])
    return None


def hint_items() -> list[tuple[str, list[str], int]]:
    return [(t, RELATIONS, len(c)) for t, c in TEMPLATES.items()] * 4


def timed_hints(label: str, provider, items) -> None:
    from cpr_neo4j.errors import HintFailed

    start = time.perf_counter()
    try:
        provider.prefetch(items)
        seconds = time.perf_counter() - start
        distinct = len({(q, h) for q, _, h in items})
        print(
            f"[{label}] hints: {distinct} distinct prompts in {seconds:.2f} s "
            f"({seconds / distinct:.3f} s per prompt); {provider.stats.line()}"
        )
    except HintFailed as exc:
        print(f"[{label}] hints failed after {time.perf_counter() - start:.1f} s: {exc}")


def check_hints(model: str | None) -> None:
    from cpr_neo4j.errors import CprError
    from cpr_neo4j.hints import server as llm_server
    from cpr_neo4j.hints.llm import OpenAIHints, VllmHints

    items = hint_items()
    if model is None:
        print("[cuda] hints: no instruct model here (--llm PATH or $CPR_GPU_LLM); skipped")
    else:
        try:
            start = time.perf_counter()
            vllm_hints = VllmHints(model, gpu_memory_utilization=0.4, max_model_len=4096)
            print(f"[cuda] vLLM loaded {model} in {time.perf_counter() - start:.1f} s")
            timed_hints("cuda", vllm_hints, items)
        except CprError as exc:
            print(f"[cuda] hints skipped: {exc}")
    if llm_server.missing():
        print("[cpu] hints: llama.cpp server not installed (extra llm-cpu); skipped")
        return
    port = llm_server.free_port()
    log = Path("/tmp") / f"gpu_check_llm_{port}.log"
    proc = llm_server.spawn("127.0.0.1", port, log, threads=os.cpu_count())
    try:
        url = llm_server.url_of("127.0.0.1", port)
        llm_server.wait_ready(url, proc, log)
        timed_hints("cpu", OpenAIHints(url, llm_server.MODEL_ALIAS, parallel=1), items)
    finally:
        proc.terminate()
        proc.wait(15)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--llm", help="Instruct model (name or local path) for vLLM hints.")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: CUDA is not available here; nothing to check (ok).")
        return 0
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    encoder = TextEncoder(device="cuda")
    pairs = make_pairs(args.pairs, seed=0)
    for device in ("cuda", "cpu"):
        check(device, encoder, pairs, args.epochs)
    spread(encoder, pairs)
    check_hints(find_llm(args.llm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
