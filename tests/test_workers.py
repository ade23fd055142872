"""Shares of one job across forked workers: every share's result, in share order, every
worker's ticks passed on in the parent, a worker's error raised in the parent."""

from __future__ import annotations

import os

import pytest

from cpr_neo4j.errors import CprError
from cpr_neo4j.stages.workers import can_fork, run_shares

pytestmark = pytest.mark.skipif(not can_fork(), reason="needs the fork start method")

ITEMS = list(range(23))


def squares(share: int, shares: int, tick) -> tuple[list[int], int]:
    out = []
    for i in ITEMS[share::shares]:
        out.append(i * i)
        tick("squares")
    return out, os.getpid()


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_share_comes_back_in_order_with_its_ticks(workers):
    ticks: list[str] = []
    parts = run_shares(squares, workers, ticks.append)
    assert len(parts) == workers
    merged = [0] * len(ITEMS)
    for k, (part, _) in enumerate(parts):
        merged[k::workers] = part
    assert merged == [i * i for i in ITEMS]
    assert ticks == ["squares"] * len(ITEMS)
    pids = [pid for _, pid in parts]
    assert pids[0] == os.getpid()  # share 0 runs here, the others in forked workers
    assert os.getpid() not in pids[1:]


def fails_in_a_worker(share: int, shares: int, tick) -> int:
    if share == 1:
        raise CprError("share 1 failed")
    return share


def test_a_workers_error_reaches_the_parent():
    with pytest.raises(CprError, match="share 1 failed"):
        run_shares(fails_in_a_worker, 2, lambda _: None)


def test_torch_threads_are_restored():
    import torch

    before = torch.get_num_threads()
    run_shares(squares, 2, lambda _: None)
    assert torch.get_num_threads() == before


def test_thread_settings_are_restored():
    """Workers run one thread per operation (model.threads); the parent's setting is back
    after the job."""
    from cpr_neo4j.model import threads

    before = threads.threads()
    run_shares(squares, 2, lambda _: None)
    assert threads.threads() == before
