"""`cpr train DATASET`: PUCT pairs from Neo4j, RCVNet, saved model + :ScoringModel."""

from __future__ import annotations

import click

from cpr_neo4j.cli.common import console, open_store, progress_bar, scope_option, table


@click.command()
@click.argument("dataset")
@click.option(
    "--hops",
    type=int,
    help="Train on questions of this hop count (depth H). "
    "Default: all questions, H = the largest hop count.",
)
@click.option(
    "--negatives",
    type=click.Choice(["puct", "random"]),
    default="puct",
    show_default=True,
    help="random = the paper's Abl.2.",
)
@click.option(
    "--max-questions",
    default=2000,
    show_default=True,
    help="Training questions rolled out (after the calibration share).",
)
@click.option(
    "--cal-share",
    type=click.FloatRange(0, 1),
    default=None,
    help="Share of the labelled questions held out for calibration (never trained on). "
    "Default: 10%, but at least 59 (what alpha = delta = 0.05 needs), or every label when "
    "there are fewer.",
)
@click.option(
    "--generated",
    type=click.IntRange(0),
    default=None,
    help="Training questions generated from the graph (relation paths from sampled "
    "entities) added to the labelled ones; never used to calibrate. Default: as many as "
    "bring the labelled training questions up to 300 (300 with none, none past 300).",
)
@click.option("--llm-url", help="OpenAI-compatible server that paraphrases generated questions.")
@click.option("--llm-model", help="Model name the --llm-url server serves.")
@click.option("--epochs", default=6, show_default=True)
@click.option("--rollouts", default=32, show_default=True)
@click.option(
    "--anchor",
    default=1.0,
    show_default=True,
    help="Weight of a loss term that puts costs of all questions on one scale "
    "(right paths < 0 < wrong ones); 0 = the paper's pairwise loss alone.",
)
@click.option(
    "--retrieval-negatives/--no-retrieval-negatives",
    default=True,
    show_default=True,
    help="Also pair each question's positives with TreeG's own wrong candidates "
    "(the paths the scorer must rank at ask time; CPR only).",
)
@click.option(
    "--random-negatives/--no-random-negatives",
    default=True,
    show_default=True,
    help="CPR also pairs positives with random walks of every length (Abl.2's negatives).",
)
@scope_option("subgraph when the dataset has per-question subgraphs, else graph")
@click.option("--seed", default=0, show_default=True)
@click.option("--device", default=None, help="cuda or cpu (default: cuda when present).")
def train(
    dataset: str,
    hops: int | None,
    negatives: str,
    max_questions: int,
    cal_share: float | None,
    generated: int | None,
    llm_url: str | None,
    llm_model: str | None,
    epochs: int,
    rollouts: int,
    anchor: float,
    retrieval_negatives: bool,
    random_negatives: bool,
    scope: str | None,
    seed: int,
    device: str | None,
) -> None:
    """Collect PUCT path pairs and train the RCVNet path scorer for DATASET."""
    from cpr_neo4j.stages.train import TrainSettings  # torch: only here
    from cpr_neo4j.stages.train import train as run_train
    from cpr_neo4j.training.labels import needs_text

    settings = TrainSettings(
        dataset,
        hops=hops,
        negatives=negatives,
        cal_share=cal_share,
        generated=generated,
        llm_url=llm_url,
        llm_model=llm_model,
        max_questions=max_questions,
        epochs=epochs,
        rollouts=rollouts,
        anchor=anchor,
        retrieval_negatives=retrieval_negatives,
        random_negatives=random_negatives,
        seed=seed,
        device=device,
        scope=scope,
    )
    with open_store() as store, progress_bar() as bar:
        task = bar.add_task("PUCT rollouts", total=None)
        result = run_train(
            store,
            settings,
            tick=lambda: bar.advance(task),
            on_questions=lambda n: bar.update(task, total=n),
        )
    f = result.figures
    rows = [
        [
            "questions (train / held-out / calibration)",
            f"{f['questions_train']} / {f['questions_heldout']} / {f['questions_cal']}",
        ],
        [
            "labelled questions / generated questions",
            f"{f['labels']} / {f['questions_generated']}"
            + (
                f" ({f['questions_paraphrased']} paraphrased)"
                if f["questions_paraphrased"] is not None
                else ""
            ),
        ],
        ["rollouts (successful)", f"{f['rollouts']} ({f['rollout_successes']})"],
        ["pairs (train / held-out)", f"{f['pairs_train']} / {f['pairs_heldout']}"],
        [
            "collection",
            f"{f['collect_seconds']} s, {f['questions_per_second']} questions/s, "
            f"{f['round_trips_per_question']} round trips/question",
        ],
        ["training", f"{f['train_seconds']} s on {f['device']}"],
        [
            "score temperature",
            f"{f['temperature']:.3g} ("
            + (
                f"fitted on {f['temperature_fitted_on']} held-out labelled questions)"
                if f.get("temperature_fitted_on")
                else "fixed: no labelled question held out to fit it on)"
            ),
        ],
        ["held-out pairwise accuracy V_sem", f"{f['heldout_accuracy_vsem']:.3f}"],
        ["held-out pairwise accuracy RCVNet", f"{f['heldout_accuracy_rcvnet']:.3f}"],
    ]
    console.print(table(f"cpr train {dataset}", ["", "value"], rows))
    console.print(f"model {result.model_id} saved in {result.folder}")
    if f["labels"] < 1000:  # few labels: say what the calibration share attains
        console.print(needs_text(f["questions_cal"]) if f["labels"] else (
            "no labelled question: this model answers without a guarantee. Label questions "
            f"(`cpr label {dataset} questions.txt -o labelled.jsonl`), add them (`cpr ingest "
            f"{dataset} --questions labelled.jsonl`) and calibrate; " + needs_text(0)
        ))  # fmt: skip
    if f["labels"]:
        console.print(f"next: cpr calibrate {dataset}")
    else:  # calibrate needs labelled questions: it would refuse now
        console.print(
            f"next: cpr label {dataset} questions.txt -o labelled.jsonl, then cpr ingest "
            f"{dataset} --questions labelled.jsonl and cpr calibrate {dataset}"
        )
