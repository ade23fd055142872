"""A named topic entity (`cpr ask --entity`, the HTTP `entity` field, and the `named_*`
curves `cpr calibrate` stores for them): one resolution rule and one masking rule, so
the curves are calibrated exactly as a named question is answered.

Resolution (linking/resolve.py `_find`): an entity id, else every entity whose name has the
same folded words (case, accents, underscores, hyphens and spacing aside, as question text
linking reads names): "amelie poulain", "ridley_scott", "Ridley-Scott", "RIDLEY SCOTT".
Entities that share the name are tied readings that the search decides (linking/readings.py
`taken_index`), at calibration as at ask time; more than MAX_TIED refuse, asking for ids.

Masking (`mask_named`): the name's words wherever the question writes them as whole
words, folded the same way ("writer of It" masks "It", never the "it" inside "writer");
a [bracketed] mention goes with its brackets. A question that does not write the name is
left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from cpr_neo4j.graph import entity_index
from cpr_neo4j.text import MASK, mask_question

# Bump when resolution or masking changes: a calibration records it (stages/pins.py).
RULE = "folded-words-v1"


def spans(text: str, name: str) -> list[tuple[int, int]]:
    """(start, end) of each place `text` writes `name` as whole folded words."""
    want = entity_index.words(name)
    toks = entity_index.tokens(text)
    out: list[tuple[int, int]] = []
    i = 0
    while want and i + len(want) <= len(toks):
        if [t[0] for t in toks[i : i + len(want)]] != want:
            i += 1
            continue
        start, end = toks[i][1], toks[i + len(want) - 1][2]
        if text[start - 1 : start] == "[" and text[end : end + 1] == "]":
            start, end = start - 1, end + 1
        out.append((start, end))
        i += len(want)
    return out


def mask_named(text: str, names: Sequence[str]) -> str:
    """`text` with every whole-word mention of `names` replaced by MASK (longer names
    first; a span overlapping one already masked is skipped)."""
    taken: list[tuple[int, int]] = []
    for name in sorted({n for n in names if n}, key=lambda n: -len(entity_index.words(n))):
        for s, e in spans(text, name):
            if all(e <= a or s >= b for a, b in taken):
                taken.append((s, e))
    out, last = [], 0
    for s, e in sorted(taken):
        out += [text[last:s], MASK]
        last = e
    return mask_question("".join(out) + text[last:])
