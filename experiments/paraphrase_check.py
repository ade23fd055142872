"""What paraphrase through an LLM server does to generated questions (issue 57, item 3): a
sample of questions generated from a dataset's graph, each sent to `--llm-url` as `cpr
train --llm-url` sends it, with the template wording, the reply kept (or not) and the
seconds per question.

    cpr llm start        # the local SmolLM2-135M server, or any OpenAI-compatible one
    python experiments/paraphrase_check.py --dataset webqsp-names --n 30 \\
        --llm-url http://127.0.0.1:8011 --llm-model SmolLM2-135M-Instruct \\
        --out experiments/results/few_labels/paraphrase-webqsp-names.md

It reads the graph only (no training, no test question): what the training data would
look like, and what 1,000 questions would cost, before a training run is spent on it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="webqsp-names")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--hops", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--llm-url", required=True)
    ap.add_argument("--llm-model")
    ap.add_argument("--out", help="also write the markdown here")
    a = ap.parse_args()

    from cpr_neo4j.config import Neo4jSettings
    from cpr_neo4j.graph import records
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.training.generate import generate
    from cpr_neo4j.training.paraphrase import Paraphraser

    with GraphStore(Neo4jSettings.load()) as store:
        made = generate(
            store, a.dataset, a.n, a.hops, records.relation_text(store, a.dataset),
            seed=a.seed, topic_answers=records.topic_answers(store, a.dataset),
        )  # fmt: skip
    rewrite = Paraphraser(a.llm_url, a.llm_model)
    rows = []
    began = time.perf_counter()
    for g in made:
        after = rewrite.one(g)
        rows.append((g.text, after.text if after.text != g.text else None))
    each = (time.perf_counter() - began) / max(len(made), 1)
    st = rewrite.stats
    lines = [
        f"{a.dataset}: {len(made)} generated questions (seed {a.seed}, 1-{a.hops} hops) "
        f"sent to {rewrite.model}: {st.rewritten} rewritten, {st.failed} kept as worded "
        f"(no usable reply); {each:.2f} s a question ({each * 1000 / 60:.0f} min for 1,000).",
        "",
        "| generated (template wording) | paraphrase kept |",
        "|---|---|",
        *(f"| {t} | {p or '(kept as worded)'} |" for t, p in rows),
    ]
    text = "\n".join(lines)
    if a.out:
        Path(a.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
