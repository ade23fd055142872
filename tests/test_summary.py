"""README results section generated from written reports (no hand-typed numbers)."""

from __future__ import annotations

import numpy as np
import pytest

from cpr_neo4j.conformal.deployed import deployed
from cpr_neo4j.conformal.evaluate import QuestionRecord, evaluate
from cpr_neo4j.conformal.report import write_report
from cpr_neo4j.conformal.summary import END, START, update


def _recs(n: int, seed: int) -> list[QuestionRecord]:
    rng = np.random.default_rng(seed)
    return [
        QuestionRecord(
            f"q{i}", frozenset({f"q{i}a0"}), {f"q{i}a{j}": float(rng.random()) for j in range(3)}
        )
        for i in range(n)
    ]


def test_readme_section_is_rewritten_from_the_json(tmp_path):
    recs = _recs(400, 0)
    for folder in ("ds-2hop", "ds-2hop-innerdev", "ds-2hop-innerdev-anchor0"):
        head = deployed({"CPR": recs[:100]}, {"CPR": recs[100:]}, [0.1, 0.3, 0.5], boot=100)
        write_report(head, evaluate({"CPR": recs}, [0.1], 2), tmp_path / "res" / folder, folder)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{START}\nold numbers\n{END}\n\nafter\n")
    update(readme, tmp_path / "res")
    text = readme.read_text()
    assert "old numbers" not in text and text.endswith(f"{END}\n\nafter\n")
    want = head.row("CPR", 0.3)
    assert f"{want.ecr:.3f}" in text and f"{want.apss:.2f}" in text
    assert "| 2hop | CPR, --anchor 0 |" in text and "| 2hop | Abl.2" not in text
    assert text.count("**ds-2hop**") == 1  # inner dev reports only feed the defaults table
    readme.write_text("no markers")
    with pytest.raises(SystemExit, match="markers"):
        update(readme, tmp_path / "res")
