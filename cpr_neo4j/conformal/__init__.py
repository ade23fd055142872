"""The conformal layer: thresholds, score families, the guarantee's rules and evaluation
(numbers only; submodules are imported explicitly so the ask path stays light)."""
