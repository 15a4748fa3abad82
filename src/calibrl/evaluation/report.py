"""The files an evaluation leaves in its run folder, defined in one place.

    <run_dir>/metrics.json   flat JSON object: `METRIC_KEYS` (numbers, or null where undefined
                             or not applicable) plus "name" and "mode" (strings). Other keys
                             may be added by callers and are kept.
    <run_dir>/bins.json      {"convention": <text>, "bins": [{"lower", "upper", "count",
                             "mean_confidence", "accuracy"}, ...]}; "bins" is [] for a mode
                             without confidences.
    <run_dir>/reliability.png, <run_dir>/confidence_hist.png   (modes with confidences only)

JSON is written with `allow_nan=False`: a NaN would be a bug, and it fails here, not in a reader.
Readers raise `UserError` naming the file for anything missing or malformed, since run folders
are what users pass on the command line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from calibrl.errors import UserError
from calibrl.evaluation.metrics import (
    DEFAULT_N_BINS,
    METRIC_KEYS,
    UNPARSABLE_CONFIDENCE,
    ReliabilityBin,
    calibration_arrays,
    reliability_bins,
    summarize,
)
from calibrl.evaluation.plots import plot_confidence_histogram, plot_reliability

METRICS_FILE = "metrics.json"
BINS_FILE = "bins.json"
RELIABILITY_PLOT = "reliability.png"
HISTOGRAM_PLOT = "confidence_hist.png"
BIN_CONVENTION = "equal width on [0, 1], right-closed: [0, 1/n], (1/n, 2/n], ..., ((n-1)/n, 1]"


def _write_json(path: Path, obj: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def save_metrics(run_dir: str | Path, metrics: Mapping[str, Any], *, name: str, mode: str) -> Path:
    """Write `metrics.json`: the `summarize` dict plus the run's name and mode."""
    missing = [k for k in METRIC_KEYS if k not in metrics]
    if missing:
        raise ValueError(f"metrics lack {', '.join(missing)}")
    return _write_json(Path(run_dir) / METRICS_FILE, {"name": name, "mode": mode, **metrics})


def save_bins(run_dir: str | Path, bins: Sequence[ReliabilityBin]) -> Path:
    """Write `bins.json`; pass [] for a mode without confidences."""
    payload = {"convention": BIN_CONVENTION, "bins": [asdict(b) for b in bins]}
    return _write_json(Path(run_dir) / BINS_FILE, payload)


def write_evaluation(
    run_dir: str | Path,
    records: Iterable[Any],
    *,
    name: str,
    mode: str,
    with_confidence: bool,
    n_bins: int = DEFAULT_N_BINS,
    unparsable_confidence: float = UNPARSABLE_CONFIDENCE,
) -> dict[str, Any]:
    """Summarise `records` and write every file above; returns the metrics as saved."""
    records = list(records)
    metrics = summarize(records, with_confidence=with_confidence, n_bins=n_bins,
                        unparsable_confidence=unparsable_confidence)
    run_dir = Path(run_dir)
    bins: list[ReliabilityBin] = []
    if with_confidence:
        conf, correct, parsable = calibration_arrays(records, unparsable_confidence)
        bins = reliability_bins(conf, correct, n_bins)
        plot_reliability(bins, run_dir / RELIABILITY_PLOT, title=f"Reliability: {name}")
        note = f"\n{int((~parsable).sum())} unparsable scored as {unparsable_confidence:g}"
        plot_confidence_histogram(conf, correct, run_dir / HISTOGRAM_PLOT, n_bins=n_bins,
                                  title=f"Confidence by correctness: {name}{note}")
    save_bins(run_dir, bins)
    save_metrics(run_dir, metrics, name=name, mode=mode)
    return {"name": name, "mode": mode, **metrics}


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise UserError(f"{path}: file not found")
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
    for key in METRIC_KEYS:
        if key not in data:
            raise UserError(f"{path}: missing {key!r}")
        if data[key] is not None and not _is_number(data[key]):
            raise UserError(f"{path}: {key!r} must be a number or null, got {data[key]!r}")
    return data


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
