"""The files an evaluation leaves in its run folder, defined in one place: written from one
computed `EvaluationResult` (`calibrl.evaluation.result`), read back by the loaders below.

    <run_dir>/metrics.json   flat JSON object: `METRIC_KEYS` (numbers, or null where undefined
                             or not applicable) plus "name" and "mode" (strings), and, when the
                             records carry difficulty groups, "by_group": {label: {METRIC_KEYS}}
                             in natural label order; with confidences "confidence_reading"
                             (which reading the metrics score: "sampled" or "expected"); with
                             groups and confidences also "within_group_auroc" (number or null)
                             and "baselines" (the difficulty table, answer likelihood, readout
                             and the other reading, "stated_expected" or "stated_sampled",
                             `calibrl.evaluation.baselines`); "extra_scores"
                             when the task has them, "bootstrap" when drawn
                             (`EvaluationResult.to_metrics`). When the reading is not
                             available, the stated confidence's metrics are null and
                             "calibration_unavailable" (here and in a group) says why
                             (`calibrl.evaluation.metrics.calibration_unavailable`). Other
                             keys may be added by callers and are kept.
    <run_dir>/bins.json      {"convention": <text>, "bins": [{"lower", "upper", "count",
                             "mean_confidence", "accuracy"}, ...]}; "bins" is [] for a mode
                             without confidences, and when calibration is not available (then
                             with "calibration_unavailable").
    <run_dir>/risk_coverage.json   {"coverage": [...], "risk": [...], "thresholds": [...]},
                             the `risk_coverage` curve; all [] for a mode without confidences,
                             and when calibration is not available (then with
                             "calibration_unavailable").
    <run_dir>/reliability.png, confidence_hist.png, risk_coverage.png   (with confidences only;
                             when calibration is not available, the reliability and
                             risk-coverage figures say so and why)

JSON is written with `allow_nan=False`: a NaN would be a bug, and it fails here, not in a reader.
Readers raise `UserError` naming the file for anything missing or malformed, since run folders
are what users pass on the command line. A metrics.json from before "aurc" existed reads with
"aurc" null, so older runs still compare.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from calibrl.errors import UserError, missing_file
from calibrl.evaluation.metrics import ReliabilityBin
from calibrl.evaluation.plots import (
    plot_confidence_histogram,
    plot_not_available,
    plot_reliability,
    plot_risk_coverage,
)
from calibrl.evaluation.records import EXPECTED, READING_NAMES, SAMPLED
from calibrl.evaluation.result import EvaluationResult
from calibrl.evaluation.summary import METRIC_KEYS, UNAVAILABLE

METRICS_FILE = "metrics.json"
BINS_FILE = "bins.json"
RELIABILITY_PLOT = "reliability.png"
HISTOGRAM_PLOT = "confidence_hist.png"
RISK_COVERAGE_FILE = "risk_coverage.json"
RISK_COVERAGE_PLOT = "risk_coverage.png"
# Every file `write_evaluation` may write: a new evaluation replaces all of them at once.
EVALUATION_FILES = (METRICS_FILE, BINS_FILE, RELIABILITY_PLOT, HISTOGRAM_PLOT, RISK_COVERAGE_FILE,
                    RISK_COVERAGE_PLOT)
CURVE_KEYS = ("coverage", "risk", "thresholds")
# Keys added after metrics.json files were first written: missing ones read as null.
LATER_KEYS = ("aurc",)
BIN_CONVENTION = "equal width on [0, 1], right-closed: [0, 1/n], (1/n, 2/n], ..., ((n-1)/n, 1]"


def _write_json(path: Path, obj: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def save_metrics(run_dir: str | Path, metrics: Mapping[str, Any], *, name: str, mode: str) -> Path:
    """Write `metrics.json`: the `summarize` dict (optionally with "by_group"), name and mode."""
    missing = [k for k in METRIC_KEYS if k not in metrics]
    if missing:
        raise ValueError(f"metrics lack {', '.join(missing)}")
    return _write_json(Path(run_dir) / METRICS_FILE, {"name": name, "mode": mode, **metrics})


def _with_reason(payload: dict[str, Any], unavailable: str | None) -> dict[str, Any]:
    return payload if unavailable is None else {**payload, UNAVAILABLE: unavailable}


def save_risk_coverage(run_dir: str | Path, curve: Sequence[Any] | None, *,
                       unavailable: str | None = None) -> Path:
    """Write `risk_coverage.json` from (coverage, risk, thresholds); None for no confidences,
    or (with `unavailable`, the reason) no calibration."""
    lists = [[float(v) for v in arr] for arr in curve] if curve is not None else [[], [], []]
    return _write_json(Path(run_dir) / RISK_COVERAGE_FILE,
                       _with_reason(dict(zip(CURVE_KEYS, lists, strict=True)), unavailable))


def save_bins(run_dir: str | Path, bins: Sequence[ReliabilityBin], *,
              unavailable: str | None = None) -> Path:
    """Write `bins.json`; pass [] for a mode without confidences, or (with `unavailable`, the
    reason) no calibration."""
    payload = {"convention": BIN_CONVENTION, "bins": [asdict(b) for b in bins]}
    return _write_json(Path(run_dir) / BINS_FILE, _with_reason(payload, unavailable))


def write_evaluation(run_dir: str | Path, result: EvaluationResult) -> dict[str, Any]:
    """Write every file above from `result` (`compute_evaluation`); returns the metrics as saved.

    Only writes: the numbers, bins and curve are the result's; the figures draw them.
    """
    run_dir = Path(run_dir)
    unavailable = result.calibration_unavailable
    if result.with_confidence:  # what the figures' confidence is, when it may not be plain
        note = (f"\n{READING_NAMES[EXPECTED]}" if result.reading == EXPECTED else
                f"\n{result.unparsable} unparsable scored as {result.unparsable_confidence:g}")
        plot_confidence_histogram(result.confidences, result.correct, run_dir / HISTOGRAM_PLOT,
                                  n_bins=result.n_bins,
                                  title=f"Confidence by correctness: {result.name}{note}")
        if unavailable is None:
            plot_reliability(result.bins, run_dir / RELIABILITY_PLOT,
                             title=f"Reliability: {result.name}")
            plot_risk_coverage({result.name: result.curve[:2]}, run_dir / RISK_COVERAGE_PLOT,
                               title=f"Risk-coverage: {result.name}{note}")
        else:
            plot_not_available(run_dir / RELIABILITY_PLOT, reason=unavailable,
                               title=f"Reliability: {result.name}")
            plot_not_available(run_dir / RISK_COVERAGE_PLOT, reason=unavailable,
                               title=f"Risk-coverage: {result.name}")
    save_bins(run_dir, result.bins, unavailable=unavailable)
    save_risk_coverage(run_dir, result.curve, unavailable=unavailable)
    metrics = result.to_metrics()
    save_metrics(run_dir, metrics, name=result.name, mode=result.mode)
    return metrics


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise missing_file(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def load_metrics(run_dir: str | Path) -> dict[str, Any]:
    """Read and check a run's `metrics.json`."""
    path = Path(run_dir) / METRICS_FILE
    data = _read_json(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    for key in ("name", "mode"):
        if not isinstance(data.get(key), str):
            raise UserError(f"{path}: {key!r} must be a string")
    _check_metric_values(data, path)
    groups = data.get("by_group")
    if groups is not None:
        if not isinstance(groups, dict):
            raise UserError(f"{path}: 'by_group' must be an object")
        for label, group in groups.items():
            if not isinstance(group, dict):
                raise UserError(f"{path}: group {label!r} must be an object")
            _check_metric_values(group, path, where=f"group {label!r}: ")
    _check_bootstrap(data.get("bootstrap"), path)
    value = data.get("within_group_auroc")
    if value is not None and not _is_number(value):
        raise UserError(f"{path}: 'within_group_auroc' must be a number or null")
    if not isinstance(data.get("baselines", {}), dict):
        raise UserError(f"{path}: 'baselines' must be an object")
    if data.get("confidence_reading", SAMPLED) not in READING_NAMES:
        raise UserError(f"{path}: 'confidence_reading' must be one of {', '.join(READING_NAMES)}")
    return data


def _check_bootstrap(intervals: Any, path: Path) -> None:
    if intervals is None:
        return
    if not isinstance(intervals, dict):
        raise UserError(f"{path}: 'bootstrap' must be an object")
    for key, interval in intervals.items():
        if interval is None:
            continue
        if not (isinstance(interval, dict)
                and all(_is_number(interval.get(k)) for k in ("se", "low", "high"))):
            raise UserError(f"{path}: bootstrap {key!r} must be null or an object with numbers "
                            "'se', 'low' and 'high'")


def _check_metric_values(data: dict[str, Any], path: Path, where: str = "") -> None:
    for key in LATER_KEYS:
        data.setdefault(key, None)
    for key in METRIC_KEYS:
        if key not in data:
            raise UserError(f"{path}: {where}missing {key!r}")
        if data[key] is not None and not _is_number(data[key]):
            raise UserError(f"{path}: {where}{key!r} must be a number or null, got {data[key]!r}")
    if not isinstance(data.get(UNAVAILABLE, ""), str):
        raise UserError(f"{path}: {where}{UNAVAILABLE!r} must be a string")


def load_bins(run_dir: str | Path) -> list[ReliabilityBin]:
    """Read and check a run's `bins.json`; [] for a run without confidences."""
    path = Path(run_dir) / BINS_FILE
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("bins"), list):
        raise UserError(f"{path}: expected an object with a 'bins' list")
    bins = []
    for i, raw in enumerate(data["bins"]):
        try:
            bins.append(_parse_bin(raw))
        except (TypeError, ValueError) as exc:
            raise UserError(f"{path}: bin {i}: {exc}") from None
    return bins


def load_risk_coverage(run_dir: str | Path) -> tuple[list[float], list[float]] | None:
    """Read and check a run's `risk_coverage.json`: (coverage, risk), or None when empty."""
    path = Path(run_dir) / RISK_COVERAGE_FILE
    data = _read_json(path)
    if not isinstance(data, dict) or not all(isinstance(data.get(k), list) for k in CURVE_KEYS):
        raise UserError(f"{path}: expected an object with lists {', '.join(CURVE_KEYS)}")
    coverage, risk, thresholds = (data[k] for k in CURVE_KEYS)
    if not len(coverage) == len(risk) == len(thresholds):
        raise UserError(f"{path}: coverage, risk and thresholds differ in length")
    if not coverage:
        return None
    if not all(_is_number(v) and 0 <= v <= 1 for v in coverage + risk + thresholds):
        raise UserError(f"{path}: values must be numbers in [0, 1]")
    if any(b <= a for a, b in itertools.pairwise(coverage)) or coverage[-1] != 1:
        raise UserError(f"{path}: coverage must increase to 1")
    return coverage, risk


def _parse_bin(raw: Any) -> ReliabilityBin:
    if not isinstance(raw, dict):
        raise TypeError("expected an object")
    b = ReliabilityBin(**raw)  # TypeError names a missing or unknown field
    if not (_is_number(b.lower) and _is_number(b.upper) and 0 <= b.lower < b.upper <= 1):
        raise ValueError("need 0 <= lower < upper <= 1")
    if not isinstance(b.count, int) or isinstance(b.count, bool) or b.count < 0:
        raise ValueError("count must be a non-negative integer")
    for value in (b.mean_confidence, b.accuracy):
        if b.count == 0 and value is not None:
            raise ValueError("an empty bin has null mean_confidence and accuracy")
        if b.count > 0 and not (_is_number(value) and 0 <= value <= 1):
            raise ValueError("mean_confidence and accuracy must be numbers in [0, 1]")
    return b
