"""Evaluation: accuracy and calibration metrics, reports and figures.

`metrics` (pure functions on per-example arrays and records), `plots` (PNG figures),
`report` (the metrics.json / bins.json format of a run folder), `compare` (table across runs).
Submodules are not imported here, so `import calibrl.evaluation` does not load matplotlib.
"""
