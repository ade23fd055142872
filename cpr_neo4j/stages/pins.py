"""What a calibration records of the code that made it, and the check that this code is
the same: the rules that decide which candidates a question gets and how they are cut.

Settings a request can choose (hops, beam width B, active A, fanout cap, hints) are stored
and compared by stages.session.check_settings; the score family with its parameters
(temperature included) and the cut's tolerance are stored and read back at ask time, so
they cannot differ. What is left is code: the linker's rules and tie limits, how a named
entity is resolved, TreeG's budget rule, the candidate, group and score-family rules, and
the tolerance's value (the ask uses the stored one; a calibration whose value differs from
this code's was made under another guarantee argument, docs/method.md). Any difference
makes the calibration stale: `cpr ask` / `cpr serve` refuse it, or answer without a
guarantee under --allow-stale, naming what changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpr_neo4j.conformal import mondrian, scores, threshold
from cpr_neo4j.linking import named, resolve
from cpr_neo4j.search import candidates, treeg

if TYPE_CHECKING:
    from cpr_neo4j.calibration import Calibration

CODE = "code"  # the calibration's property: JSON of every pin's value at calibration


@dataclass(frozen=True)
class Pin:
    key: str
    what: str  # what the value decides, for the message
    now: Callable[[], Any]  # this code's value (read at call time: a test may patch it)


PINS: tuple[Pin, ...] = (
    Pin("linker", "the linker's name rules (linking/resolve.py LINKER)", lambda: resolve.LINKER),
    Pin("max_tied", "readings searched when names tie (MAX_TIED)", lambda: resolve.MAX_TIED),
    Pin(
        "runners_up",
        "readings searched beyond the tied ones (RUNNERS_UP)",
        lambda: resolve.RUNNERS_UP,
    ),
    Pin(
        "named_rule",
        "how a named entity is resolved and masked (linking/named.py RULE)",
        lambda: named.RULE,
    ),
    Pin("treeg", "TreeG's budget rule (search/treeg.py TREEG_RULES)", lambda: treeg.TREEG_RULES),
    Pin(
        "candidates",
        "the candidate rule (search/candidates.py CANDIDATE_RULES)",
        lambda: candidates.CANDIDATE_RULES,
    ),
    Pin(
        "groups", "the group rule (conformal/mondrian.py GROUP_RULES)", lambda: mondrian.GROUP_RULES
    ),
    Pin(
        "min_group",
        "the smallest group with its own threshold (MIN_GROUP)",
        lambda: mondrian.MIN_GROUP,
    ),
    Pin(
        "families",
        "the score families' definitions (conformal/scores.py FAMILY_RULES)",
        lambda: scores.FAMILY_RULES,
    ),
    Pin(
        "tolerance",
        "the cut's tolerance (conformal/threshold.py TOLERANCE)",
        lambda: threshold.TOLERANCE,
    ),
)


def current() -> dict[str, Any]:
    """Every pin's value in this code (what `cpr calibrate` stores as CODE)."""
    return {p.key: p.now() for p in PINS}


def changed(cal: Calibration) -> str | None:
    """Why this code no longer makes the calibration's candidates and cuts, or None."""
    if cal.code is None:
        return (
            "it was made before calibrations recorded the code they were made with (linker "
            "rules, tie limits, TreeG budget, candidate, group and score rules, tolerance), "
            "so this cpr cannot tell whether they still hold"
        )
    # the tolerance the cut uses is the one stored with the calibration
    made = {**cal.code, "tolerance": cal.tolerance}
    now = current()
    diff = [
        f"{p.what} was {made.get(p.key)!r} at calibration and is {now[p.key]!r} now"
        for p in PINS
        if made.get(p.key) != now[p.key]
    ]
    return "; ".join(diff) or None
