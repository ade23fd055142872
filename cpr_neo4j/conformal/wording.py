"""The sentences printed with a set: what it promises, for whom, and for whom not.

Every sentence names its population (the calibration questions its threshold came from),
whether it is marginal (on average over calibration draws) or for this calibration (PAC,
and then per group and per alpha: the delta is spent on each separately, not jointly),
and, for a fallback threshold, that it promises nothing for this kind of question in
particular. conformal/guarantee.py decides the thresholds; this module only words them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpr_neo4j.conformal.threshold import percent

if TYPE_CHECKING:
    from cpr_neo4j.conformal.guarantee import Calibrated, Request, Threshold


def sentence(cal: Calibrated, req: Request, th: Threshold) -> str:
    who = describe_population(cal, req, th)
    note = caveat(cal, req, th)
    tail = f"; {note}" if note else ""
    if req.risk == "fnr":
        return (
            f"averaged over questions like {who} that have at least one correct answer, "
            f"and over calibration draws, sets made this way hold at least "
            f"{percent(1 - req.alpha)} of the correct answers (a marginal guarantee: not "
            f"one for this calibration, nor for this question){tail}"
        )
    if req.pac is None:
        return (
            f"for questions like {who}, a set made this way contains a correct answer "
            f"with probability at least {percent(1 - req.alpha)} on average over "
            f"calibration draws (a marginal guarantee: a delta above 0 gives one for this "
            f"calibration){tail}"
        )
    grouped = req.grouped and th.pool != "all"
    per = {"small": "the pooled small groups"}.get(th.pool, "this group")
    if th.pool == "small":  # exact for one group's own pool, approximate for several
        return (
            f"with probability of about {percent(1 - req.pac)} over the calibration draw "
            f"(approximate: the pool's calibration questions mix its groups as this sample "
            f"does, not as new questions will), sets made with this calibration contain a "
            f"correct answer for at least {percent(1 - req.alpha)} of questions like {who}; "
            f"that holds for the pooled small groups and this alpha on its own, not for "
            f"every group and alpha at once{tail}"
        )
    return (
        f"with probability at least {percent(1 - req.pac)} over the calibration draw, "
        f"sets made with this calibration contain a correct answer for at least "
        f"{percent(1 - req.alpha)} of questions like {who}; that "
        f"{percent(1 - req.pac)} holds for "
        + (f"{per} and this alpha on its own, not for every group and alpha" if grouped
           else "this alpha on its own, not for every alpha")
        + f" at once{tail}"
    )  # fmt: skip


def caveat(cal: Calibrated, req: Request, th: Threshold) -> str | None:
    """What the sentence does not promise when the threshold is a fallback; None for a
    group's own threshold or an ungrouped one."""
    if not req.grouped or th.pool.startswith("g"):
        return None
    mine = cal.group_n(req, th.group)
    kind = f"questions whose best candidate path has {th.group} hop(s)"
    if th.pool == "small":
        return (
            f"a guarantee for the pooled small groups as a whole, not for {kind} (this "
            f"one's group, {mine} calibration question(s)) in particular"
        )
    return (
        f"this is marginal over all {th.n:,} calibration questions, with no promise for "
        f"questions like this one in particular: {kind} have {mine} calibration "
        f"question(s), too few, even with the other small groups, for a threshold of their own"
    )


def describe_population(cal: Calibrated, req: Request, th: Threshold) -> str:
    p = cal.population
    base = f"the {p.get('n', cal.n):,} calibration questions of {p.get('dataset', '?')}"
    hops = p.get("hops_label")
    if hops:
        base += f" ({hops})"
    if not req.grouped or th.pool == "all":
        return base
    if th.pool.startswith("g"):
        return (
            f"{base} whose best candidate path has {th.group} hop(s), as this one's does "
            f"({th.n:,} of them)"
        )
    return f"{base} in the small groups pooled with this one's ({th.n:,} of them)"
