"""`cpr eval` and what it reports: the questions and candidate tables it scores
(eval_tables.py, table.py), the deployed protocol (deployed.py) with its diagnostics,
resampling views and shift tests (diagnostics.py, resample.py, shift.py), the hop-level
baseline (hoplevel.py, hoplevel_thresholds.py), the report (report.py) and the results
tables `make results` writes (summary.py)."""
