"""The conformal layer: thresholds, score families, the guarantee's rules and evaluation
(numbers only; submodules are imported explicitly so the ask path stays light)."""

# The default guarantee is calibration-conditional (PAC) with this delta: one user has one
# calibration (docs/method.md, the inner dev figures). Here, not in guarantee.py, so that
# the CLI's and the HTTP API's option defaults read it without importing numpy.
DEFAULT_DELTA = 0.05
