"""Which calibration serves a question, and what to do when none does.

Messages name the options a user can change in the words of the request: CLI flags by
default, the HTTP request's fields when `fields` says so (the wording stages/session.py
passes: a mapping of option name to how it is written; "hops" is read from it when
present, else from FIELDS_HTTP / FIELDS_CLI by the style of its other entries). Commands
to run (`cpr train`, `cpr calibrate`) stay commands: there is no HTTP for those.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cpr_neo4j.errors import CprError

ALL_HOPS = 0  # a model's hops_filter when it was trained on every hop count
FIELDS_CLI = {"hops": "--hops"}
FIELDS_HTTP = {"hops": "the `hops` field"}


def hops_option(fields: Mapping[str, str] | None) -> str:
    """How the request names its hop count: `fields["hops"]`, else the style of the other
    fields (an HTTP wording writes "the `x` field"), else the CLI flag."""
    f = fields or {}
    if "hops" in f:
        return f["hops"]
    http = any("field" in str(v) for v in f.values())
    return (FIELDS_HTTP if http else FIELDS_CLI)["hops"]


def serving(
    read: Callable[[int | None], dict | None],
    dataset: str,
    hops: int | None,
    model_id: str | None = None,
    fields: Mapping[str, str] | None = None,
) -> dict:
    """The calibration that serves a question: `read(hops_filter)` returns the newest one
    of that filter (None: any). Without a hop count (and without a pinned model) only a
    calibration for every hop count will do: a fixed-hop one promises nothing for a
    question whose hop count nobody knows. fields: how messages name the request's
    options (CLI flags when None)."""
    if model_id is not None:
        cal = read(None)
        if cal is None:
            raise CprError(f"model {model_id} has no calibration on {dataset!r}: run `cpr "
                           f"calibrate {dataset} --model {model_id}`")  # fmt: skip
        return cal
    if hops is not None:
        cal = read(hops)
        if cal is None:
            raise CprError(
                f"dataset {dataset!r} has no calibration for {hops}-hop questions: run "
                f"`cpr train {dataset} --hops {hops}` and `cpr calibrate {dataset} --hops {hops}`"
            )
        return cal
    cal = read(ALL_HOPS)
    if cal is not None:
        return cal
    fixed = read(None)
    if fixed is None:
        raise CprError(
            f"dataset {dataset!r} has no calibration: run `cpr train {dataset}` then "
            f"`cpr calibrate {dataset}`"
        )
    h = fixed.get("hops_filter") or fixed.get("hops")
    opt = hops_option(fields)
    give = f"pass {opt} {h}" if opt.startswith("--") else f"set {opt} to {h}"
    raise CprError(
        f"dataset {dataset!r} is calibrated only for {h}-hop questions, which guarantees "
        f"nothing for a question of unknown hop count: run `cpr train {dataset}` and `cpr "
        f"calibrate {dataset}` (every hop count), or {give} if your question has {h}"
    )
