"""Evaluation: accuracy and calibration metrics, reports and figures.

Compute, then write: `records` (evaluated answers, converted to arrays once), `metrics` (pure
functions on per-example arrays), `summary` (the flat metrics, overall and per group),
`baselines`, `readout` and `bootstrap` (references and intervals), `result`
(`compute_evaluation`: all of it as one `EvaluationResult`, no I/O), `plots` (PNG figures),
`report` (`write_evaluation` writes a result; the run folder's files and their readers),
`compare` (table across runs), `run` and `during_training` (generate, then evaluate),
`stated_value` (each answer's expected stated value, beside the sampled one).
Submodules are not imported here, so `import calibrl.evaluation` does not load matplotlib.
"""
