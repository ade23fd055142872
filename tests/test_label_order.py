"""`cpr label`'s order: a hash of each question's text, not the file's order, so that
wherever a person stops, the labelled questions are a random sample of the file (what
calibration needs) and a rerun resumes in the same order."""

import statistics

from cpr_neo4j.training.labelling import labelling_order


def test_the_order_ignores_the_files_order_and_resumes():
    texts = [f"question {i:04d} asked on day {i}" for i in range(1, 1001)]  # a sorted log
    order = labelling_order(texts)
    assert sorted(order) == sorted(texts)
    assert labelling_order(texts[::-1]) == order
    done = set(order[:37])  # a rerun after 37 labels goes on where it stopped
    assert labelling_order([t for t in texts if t not in done]) == order[37:]


def test_a_prefix_of_the_order_samples_the_whole_file():
    texts = [f"question {i:04d} asked on day {i}" for i in range(1, 1001)]
    first = [int(t.split()[1]) for t in labelling_order(texts)[:100]]
    # 100 drawn at random from positions 1..1000: mean 500.5, sd sqrt((N^2 - 1) / 12 / n *
    # (N - n) / (N - 1)) = 27.4; the file's own order would give 50.5, 16 sd away
    sd = ((1000**2 - 1) / 12 / 100 * 900 / 999) ** 0.5
    assert abs(statistics.mean(first) - 500.5) < 4 * sd
    assert sum(p <= 500 for p in first) not in (0, 100)
