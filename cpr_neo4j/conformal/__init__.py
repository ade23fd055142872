"""The guarantee itself: thresholds, groups, risk control, score families, answer sets and
their wording (numbers only; submodules are imported explicitly so the ask path stays
light). How well it holds on held-out questions is measured in evaluation/."""

# The default guarantee is calibration-conditional (PAC) with this delta: one user has one
# calibration (docs/method.md, the inner dev figures). Here, not in guarantee.py, so that
# the CLI's and the HTTP API's option defaults read it without importing numpy.
DEFAULT_DELTA = 0.05


def refuse_fnr_delta(risk: str, delta: float | None, name: str) -> None:
    """An explicit delta above 0 with risk fnr is refused, not dropped: conformal risk
    control bounds the expected false-negative rate over calibration draws and has no
    calibration-conditional (PAC) form here. `name` is how the caller spells delta (the
    CLI's --delta, the HTTP request's field)."""
    if risk == "fnr" and delta:
        from cpr_neo4j.errors import BadInput

        raise BadInput(
            f"{name}={delta:g} asks for a guarantee for this calibration (PAC), which only "
            f"risk coverage gives: risk fnr bounds the false-negative rate on average over "
            f"calibration draws (conformal risk control), for no calibration in particular; "
            f"leave {name} out (or set it to 0) with risk fnr"
        )
