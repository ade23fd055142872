"""Every relative link in the docs a reader follows (README.md, docs/*.md, the results and
experiments indexes) points at a file or folder that exists."""

from __future__ import annotations

import re

from tests.conftest import REPO

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOCS = ["README.md", "experiments/README.md", "docs/results/README.md", "docs/*.md"]


def _broken(md) -> list[str]:
    out = []
    for target in LINK.findall(md.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the same page
        if not (md.parent / target.split("#")[0]).exists():
            out.append(f"{md.relative_to(REPO)}: {target}")
    return out


def test_relative_links_in_the_docs_resolve():
    pages = sorted({p for pattern in DOCS for p in REPO.glob(pattern)})
    assert len(pages) >= 5, pages  # the patterns still find the docs
    broken = [b for md in pages for b in _broken(md)]
    assert not broken, broken
