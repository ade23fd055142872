"""Training RCVNet on (p+, p-) pairs: loss softplus(V(p+) - V(p-)), Adam, in torch.

torch is imported inside train_rcvnet only: TrainReport, pair_rows and pairwise_accuracy
(numpy scoring) serve the model store and `cpr eval` without it. Training reads the
scorer's numpy tables through a torch mirror (model.rcvnet_torch.TorchTables), trains a
torch RCVNet and hands the weights back to the scorer as numpy (RCVWeights).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from cpr_neo4j.errors import CprError
from cpr_neo4j.model.rcvnet import RCVConfig
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.search.paths import PathPair


@dataclass
class TrainReport:
    pairs: int
    epochs: int
    lr: float
    batch_size: int
    seed: int
    device: str
    seconds: float
    epoch_losses: list[float]
    accuracy_vsem: float  # pairwise accuracy on the training pairs before training
    accuracy_trained: float  # and after

    def to_dict(self) -> dict:
        return asdict(self)


def pair_rows(
    scorer: PathScorer, pairs: Sequence[PathPair]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(question rows, positive path rows, negative path rows), embedding what is new."""
    ctxs = scorer.questions([p.masked_question for p in pairs])
    q_rows = np.array([c.row for c in ctxs], dtype=np.int64)
    pos = scorer.path_rows([p.pos.relpath for p in pairs])
    neg = scorer.path_rows([p.neg.relpath for p in pairs])
    return q_rows, pos, neg


def pairwise_accuracy(scorer: PathScorer, pairs: Sequence[PathPair], use_net: bool = True) -> float:
    """Fraction of pairs with V(p+) < V(p-); a tie counts one half (as in ROC AUC), so an
    uninformative constant scorer sits at 0.5 rather than 0."""
    if not pairs:
        return float("nan")
    q, pos, neg = pair_rows(scorer, pairs)
    v_pos = scorer.cost_rows(q, pos, use_net)
    v_neg = scorer.cost_rows(q, neg, use_net)
    return float(np.mean((v_pos < v_neg) + 0.5 * (v_pos == v_neg)))


def training_device(scorer: PathScorer) -> str:
    """The scorer's device when one was asked for; by default CUDA when present (training
    is where a GPU pays, while the default scorer stays on the CPU), else the CPU."""
    if scorer.requested_device is not None:
        return scorer.device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def train_rcvnet(
    scorer: PathScorer,
    pairs: Sequence[PathPair],
    epochs: int = 6,
    lr: float = 5e-3,
    batch_size: int = 256,
    seed: int = 0,
    progress: bool = True,
    config: RCVConfig | None = None,
    anchor: float = 0.0,
    device: str | None = None,
    anchored: Sequence[bool] | None = None,
) -> TrainReport:
    """Train scorer.net (a fresh RCVNet seeded with `seed` when the scorer has none) and
    set the result on the scorer. `seed` also fixes the batch order: same pairs + seed ->
    same weights on CPU. device: where torch trains (default: training_device).

    anchor > 0 adds anchor * (softplus(V(p+)) + softplus(-V(p-))): the pairwise loss only
    orders paths within a question, while one conformal threshold serves all questions,
    so costs on a shared scale (right paths below 0, wrong ones above) give smaller sets.
    anchored: which pairs take the anchor term (default all), e.g. only real questions' when
    generated ones, worded unlike the questions calibrated on, would set the scale.
    """
    if not pairs:
        raise CprError(
            "no training pairs: collect them first (no question had a reachable answer?)"
        )
    import torch
    from torch.nn import functional as F

    from cpr_neo4j.model.rcvnet_torch import RCVNet, TorchTables

    device = device or training_device(scorer)
    if scorer.net is None:
        net = RCVNet(config, seed=seed).to(device)
    else:
        net = RCVNet.from_weights(scorer.net).to(device)
    started = time.perf_counter()
    acc_before = pairwise_accuracy(scorer, pairs, use_net=False)
    q_np, pos_np, neg_np = pair_rows(scorer, pairs)
    tables = TorchTables(scorer, device)  # after pair_rows: every row is in the tables
    q, pos, neg = (torch.from_numpy(a).to(device) for a in (q_np, pos_np, neg_np))
    weight = torch.ones(len(pairs)) if anchored is None else torch.tensor(anchored).float()
    weight = weight.to(device)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    n = len(pairs)
    batches = (n + batch_size - 1) // batch_size
    losses: list[float] = []
    net.train()
    with _progress(progress) as bar:
        task = bar.add_task("training RCVNet", total=epochs * batches) if bar else None
        for epoch in range(epochs):
            order = torch.randperm(n, generator=gen).to(device)
            total = 0.0
            for b in range(batches):
                idx = order[b * batch_size : (b + 1) * batch_size]
                v_pos = tables.costs(net, q[idx], pos[idx])
                v_neg = tables.costs(net, q[idx], neg[idx])
                loss = F.softplus(v_pos - v_neg).mean()
                if anchor:
                    scale = F.softplus(v_pos) + F.softplus(-v_neg)
                    loss = loss + anchor * (weight[idx] * scale).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
                if bar:
                    bar.update(task, advance=1, description=f"epoch {epoch + 1}/{epochs}")
            losses.append(total / n)
    net.eval()
    scorer.net = net.to_weights()
    return TrainReport(
        pairs=n,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        seed=seed,
        device=str(device),
        seconds=round(time.perf_counter() - started, 3),
        epoch_losses=losses,
        accuracy_vsem=acc_before,
        accuracy_trained=pairwise_accuracy(scorer, pairs, use_net=True),
    )


class _NoBar:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(enabled: bool):
    if not enabled:
        return _NoBar()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    )
