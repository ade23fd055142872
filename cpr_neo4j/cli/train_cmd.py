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
    default=0.1,
    show_default=True,
    help="Share of the training split held out for calibration.",
)
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
    cal_share: float,
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
    from cpr_neo4j.stages.train import TrainSettings  # torch: only when training
    from cpr_neo4j.stages.train import train as run_train

    settings = TrainSettings(
        dataset,
        hops=hops,
        negatives=negatives,
        cal_share=cal_share,
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
        ["rollouts (successful)", f"{f['rollouts']} ({f['rollout_successes']})"],
        ["pairs (train / held-out)", f"{f['pairs_train']} / {f['pairs_heldout']}"],
        [
            "collection",
            f"{f['collect_seconds']} s, {f['questions_per_second']} questions/s, "
            f"{f['round_trips_per_question']} round trips/question",
        ],
        ["training", f"{f['train_seconds']} s on {f['device']}"],
        ["held-out pairwise accuracy V_sem", f"{f['heldout_accuracy_vsem']:.3f}"],
        ["held-out pairwise accuracy RCVNet", f"{f['heldout_accuracy_rcvnet']:.3f}"],
    ]
    console.print(table(f"cpr train {dataset}", ["", "value"], rows))
    console.print(f"model {result.model_id} saved in {result.folder}")
    console.print(f"next: cpr calibrate {dataset}")
