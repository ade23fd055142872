"""The written report (evaluation.report) and the README results section generated from
it (evaluation.summary): files, sections, and numbers copied from the JSON, never typed."""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pytest

from cpr_neo4j.evaluation.deployed import Variant, deployed
from cpr_neo4j.evaluation.report import CPR, main, panels, results_of, styles, write_report
from cpr_neo4j.evaluation.summary import ALPHAS, END, HEADLINE_METHODS, RELEASE, START, update
from cpr_neo4j.evaluation.table import TableBuilder

CENTRED = {"family": "centred", "centre": 0.97}
SECTIONS = [
    "# Coverage report: synthetic release",
    "## Deployed protocol: coverage (headline)",
    "## Answer recall (false-negative rate)",
    "## Coverage by number of gold answers",
    "## Diagnostics: calibration vs evaluation questions",
    "## Pooled view (second view)",
    "## Notes",
]


def _table(rng, n: int, recall: float = 0.97, shift: float = 0.0, prefix: str = "q"):
    """Questions of 1-3 hops (hops = group), 1-4 gold answers tied on one sequence found
    with probability `recall`, 2-5 wrong sequences; 20 templates; surprisal unused."""
    b = TableBuilder(0.5)
    for i in range(n):
        h = int(rng.integers(1, 4))
        gold = [f"{prefix}{i}g{k}" for k in range(int(rng.integers(1, 5)))]
        seqs = []
        if rng.random() < recall:
            seqs.append((round(0.3 * h + shift + rng.normal(0, 0.5), 2), gold))
        for j in range(int(rng.integers(2, 6))):
            ids = [f"{prefix}{i}w{j}e{k}" for k in range(int(rng.integers(1, 4)))]
            seqs.append((round(float(rng.normal(1.2, 0.6)), 2), ids))
        rows = sorted((c, e) for c, ids in seqs for e in ids)
        b.add(f"{prefix}{i}", h, f"t{int(rng.integers(20))}", set(gold), [e for _, e in rows],
              np.array([c for c, _ in rows]), np.zeros(len(rows)), h)  # fmt: skip
    return b.build()


def _results(seed: int):
    """The headline variants; Abl.2's tables have lower recall (alpha 0.1 unattainable)
    and a harder test split (below target)."""
    rng = np.random.default_rng(seed)
    abl = "Abl.2 (w/o PUCT)"
    cal = {"CPR": _table(rng, 300, prefix="c"), abl: _table(rng, 300, recall=0.85, prefix="c")}
    test = {
        "CPR": _table(rng, 500, prefix="t"),
        abl: _table(rng, 500, recall=0.85, shift=0.8, prefix="t"),
    }
    variants = [
        Variant("CPR", "CPR", CENTRED, diagnose=True),
        Variant("CPR, answer recall (FNR)", "CPR", CENTRED, None, risk="fnr"),
        Variant(HEADLINE_METHODS[2], "CPR", CENTRED, None, allow_empty=True, grouped=False),
        Variant("top-k (CPR)", "CPR", {"family": "id_rank"}, None, grouped=False),
        Variant("top-k levels (CPR)", "CPR", {"family": "level"}, None, grouped=False),
        Variant(abl, abl, CENTRED, diagnose=True),
    ]
    assert [v.name for v in variants] == list(HEADLINE_METHODS)
    res = deployed(cal, test, variants, list(ALPHAS), {"dataset": "synthetic"}, boot=100,
                   draws=20)  # fmt: skip
    res.notes = ["a note for the notes section"]
    return res


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("res")
    files = {
        RELEASE: write_report(_results(0), root / RELEASE, "synthetic release"),
        "ds-2hop": write_report(_results(1), root / "ds-2hop", "synthetic 2-hop"),
    }
    return root, files


def test_write_report_files(written):
    root, all_files = written
    files = all_files[RELEASE]
    assert set(files) == {"json", "markdown", "ecr_plot", "apss_plot"}
    for path in files.values():
        assert path.parent == root / RELEASE and path.exists() and path.stat().st_size > 0
    for key in ("ecr_plot", "apss_plot"):
        assert files[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads(files["json"].read_text())
    assert data["title"] == "synthetic release" and data["commit"]
    d = data["deployed"]
    assert d["methods"] == list(HEADLINE_METHODS) and d["alphas"] == list(ALPHAS)
    assert len(d["rows"]) == len(HEADLINE_METHODS) * len(ALPHAS)
    assert {r["method"] for r in d["rows"]} == set(HEADLINE_METHODS)
    assert [x["method"] for x in d["diagnoses"]] == ["CPR", "Abl.2 (w/o PUCT)"]
    assert d["notes"] == ["a note for the notes section"]
    md = files["markdown"].read_text()
    pos = [md.index(h) for h in SECTIONS]
    assert pos == sorted(pos)  # every section, in order
    for name in HEADLINE_METHODS:
        assert f"| {name} |" in md, name
    assert "- a note for the notes section" in md
    # coverage rows in the headline table, every row in the FNR table, one per alpha
    head = md[pos[1] : pos[2]]
    fnr = md[pos[2] : pos[3]]
    assert head.count("| CPR | ") == len(ALPHAS) and "| CPR, answer recall (FNR) |" not in head
    assert fnr.count("| CPR, answer recall (FNR) |") == len(ALPHAS)
    abl = [r for r in d["rows"] if r["method"] == "Abl.2 (w/o PUCT)"]
    assert not abl[0]["attainable"] and "unattainable for some group" in head
    assert any(r["ecr_hi"] < 1 - r["alpha"] for r in abl) and " ! |" in head


def _parse_cell(cell: str):
    m = re.fullmatch(
        r"(FNR )?(\d\.\d{3})( \*\*!\*\*)?( \(unattainable\))? / (\d+\.\d{2}) / (\d\.\d{2})", cell
    )
    assert m, cell
    return bool(m[1]), m[2], bool(m[3]), bool(m[4]), m[5], m[6]


def test_readme_section_is_rewritten_from_the_json(written):
    root, _ = written
    readme = root.parent / "README.md"
    before, after = "# project\n\nintro text\n\n", "\n\n## Later section\n\nkept as is\n"
    readme.write_text(f"{before}{START}\nold numbers 0.123\n{END}{after}", encoding="utf-8")
    update(readme, root)
    text = readme.read_text(encoding="utf-8")
    assert text.startswith(before + START) and text.endswith(END + after)
    assert "old numbers" not in text
    section = text[text.index(START) : text.index(END)]
    assert f"{root}/{RELEASE}/results.json" in section
    assert f"[full report]({root}/{RELEASE}/report.md)" in section
    data = json.loads((root / RELEASE / "results.json").read_text())
    rows = {(r["method"], round(r["alpha"], 6)): r for r in data["deployed"]["rows"]}
    lines = {ln.split(" | ")[0][2:]: ln for ln in section.splitlines() if ln.startswith("| ")}
    for name in HEADLINE_METHODS:
        cells = lines[name].strip("| ").split(" | ")
        assert cells[0] == name and len(cells) == len(ALPHAS) + 3
        for a, cell in zip(ALPHAS, cells[1:], strict=False):
            r = rows[(name, a)]
            is_fnr, main, mark, unatt, apss, f1 = _parse_cell(cell)
            assert is_fnr == (r["risk"] == "fnr")
            assert main == format(r["fnr"] if is_fnr else r["ecr"], ".3f")
            assert apss == format(r["apss"], ".2f") and f1 == format(r["metrics"]["f1"], ".2f")
            assert mark == (r["risk"] == "coverage" and r["ecr_hi"] < 1 - a - 1e-12)
            assert unatt == (not r["attainable"])
        first = rows[(name, ALPHAS[0])]
        hits = first["metrics"]["hits1"]
        assert cells[-2] == ("–" if hits is None or math.isnan(hits) else format(hits, ".3f"))
        hops = " / ".join(f"{x['ecr']:.3f}" for _, x in sorted(first["by_hops"].items()))
        assert cells[-1] == hops and hops.count(" / ") == 2  # hop counts 1, 2, 3
    # the second report is only in the index, not in the README
    assert "synthetic 2-hop" not in section


def test_results_index_has_every_report(written):
    root, _ = written
    index = (root / "README.md").read_text(encoding="utf-8")
    assert index.startswith("# Results\n")
    for folder, title in ((RELEASE, "synthetic release"), ("ds-2hop", "synthetic 2-hop")):
        assert index.count(f"**{title}**") == 1 and f"[full report]({folder}/report.md)" in index
        data = json.loads((root / folder / "results.json").read_text())
        for r in data["deployed"]["rows"]:
            if r["alpha"] == 0.3:
                main = r["fnr"] if r["risk"] == "fnr" else r["ecr"]
                assert f"{main:.3f}" in index and f"| {r['method']} |" in index
    # ordered by folder name
    assert index.index("**synthetic 2-hop**") < index.index("**synthetic release**")


def test_update_refuses_a_readme_without_markers_and_says_when_no_release(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("no markers here\n")
    with pytest.raises(SystemExit, match="markers"):
        update(readme, tmp_path)
    assert readme.read_text() == "no markers here\n"
    (tmp_path / "res").mkdir()
    readme.write_text(f"a\n{START}\nx\n{END}\nb\n")
    update(readme, tmp_path / "res")
    assert "no release report yet" in readme.read_text()
    assert (tmp_path / "res" / "README.md").read_text().startswith("# Results")


def test_plots_show_cpr_against_a_few_rows_each_with_its_own_colour_and_marker():
    methods = [*HEADLINE_METHODS, "Abl.1 (V_sem)", "UaG hop-level, Bonferroni (V_sem)"]
    ps = panels(methods)
    assert [p.title for p in ps] == [
        "CPR against the baselines",
        "CPR against its variants",
        "CPR against conformal top-k",
    ]
    assert all(p.methods[0] == CPR for p in ps)  # CPR in every panel, drawn first
    placed = [m for p in ps for m in p.methods[1:]]
    assert sorted(placed) == sorted(m for m in methods if m != CPR)  # each row once
    assert ps[0].methods[1:] == ("Abl.2 (w/o PUCT)", "Abl.1 (V_sem)",
                                 "UaG hop-level, Bonferroni (V_sem)")  # fmt: skip
    assert max(len(p.methods) for p in ps) <= 7
    st = styles(methods)
    assert set(st) == set(methods)
    assert len({st[m]["color"] for m in methods}) == len(methods)
    assert len({st[m]["marker"] for m in methods}) == len(methods)
    assert st[CPR]["color"] == "black" and st[CPR]["lw"] > max(
        st[m]["lw"] for m in methods if m != CPR
    )
    assert panels([CPR])[0].methods == (CPR,)


def test_replot_draws_the_run_s_figures_again_from_results_json(written, tmp_path, capsys):
    root, _ = written
    folder = tmp_path / RELEASE
    shutil.copytree(root / RELEASE, folder)
    before = {n: (folder / n).read_bytes() for n in ("ecr.png", "apss.png", "report.md")}
    for n in ("ecr.png", "apss.png"):
        (folder / n).unlink()
    assert main(["--replot", str(folder)]) == 0
    after = {n: (folder / n).read_bytes() for n in before}
    assert after == before  # the same pixels from the JSON alone; the report untouched
    back = results_of(folder / "results.json")
    assert back.methods == list(HEADLINE_METHODS) and len(back.rows) == len(HEADLINE_METHODS) * len(
        ALPHAS
    )
    capsys.readouterr()
    assert main(["--replot", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no results.json in") and "\n" not in err
