"""Run files and the comparison table: round trips, numbers in the table, UserError on bad files."""

from __future__ import annotations

import json

import pytest

from calibrl.errors import UserError
from calibrl.evaluation.compare import compare_runs, plot_compare
from calibrl.evaluation.metrics import EvalRecord, reliability_bins, summarize
from calibrl.evaluation.report import (
    BINS_FILE,
    HISTOGRAM_PLOT,
    METRICS_FILE,
    RELIABILITY_PLOT,
    load_bins,
    load_metrics,
    save_bins,
    save_metrics,
    write_evaluation,
)

RLCR_RECORDS = [
    EvalRecord(correct=True, confidence=0.9, format_ok=True, answer_len=10, conf_len=4),
    EvalRecord(correct=False, confidence=None, format_ok=True, answer_len=20, conf_len=6),
    EvalRecord(correct=False, confidence=0.2, format_ok=False, answer_len=30, conf_len=5),
    EvalRecord(correct=True, confidence=0.6, format_ok=True, answer_len=40, conf_len=5),
]
RLVR_RECORDS = [
    EvalRecord(correct=c, confidence=None, format_ok=True, answer_len=12, conf_len=None)
    for c in (True, True, False)
]


@pytest.fixture
def two_runs(tmp_path):
    rlcr, rlvr = tmp_path / "rlcr", tmp_path / "rlvr"
    write_evaluation(rlcr, RLCR_RECORDS, name="rlcr-2turn", mode="two_turn", with_confidence=True)
    write_evaluation(rlvr, RLVR_RECORDS, name="rlvr", mode="rlvr", with_confidence=False)
    return rlcr, rlvr


def test_write_evaluation_files(two_runs):
    rlcr, rlvr = two_runs
    for name in (METRICS_FILE, BINS_FILE, RELIABILITY_PLOT, HISTOGRAM_PLOT):
        assert (rlcr / name).stat().st_size > 0
    assert not (rlvr / RELIABILITY_PLOT).exists()
    assert load_bins(rlvr) == []
    assert load_metrics(rlcr) == {"name": "rlcr-2turn", "mode": "two_turn",
                                  **summarize(RLCR_RECORDS)}


def test_bins_round_trip(tmp_path):
    bins = reliability_bins([0.0, 0.3, 0.3, 1.0], [False, True, False, True], n_bins=4)
    save_bins(tmp_path, bins)
    assert load_bins(tmp_path) == bins


def test_table_contains_the_numbers(two_runs):
    rlcr, rlvr = two_runs
    table = compare_runs([rlcr, rlvr])
    lines = table.strip().splitlines()
    assert len(lines) == 4 and lines[1].startswith("|---|---|---:")
    # Hand-computed in test_eval_metrics: ECE .175, Brier .0525, AUROC 1, mean conf .425.
    assert lines[2].startswith("| rlcr-2turn | two_turn | 4 | 0.5000 | 0.1750 | 0.0525 | 1.0000 |")
    assert "| 0.4250 | 0.2500 | 0.2500 | 25.0 | 5.0 |" in lines[2]
    assert lines[3] == ("| rlvr | rlvr | 3 | 0.6667 | n/a | n/a | n/a | n/a | n/a | 0.0000 "
                        "| 12.0 | n/a |")


def test_compare_plot(two_runs, tmp_path):
    rlcr, rlvr = two_runs
    out = tmp_path / "cmp.png"
    compare_runs([rlcr, rlvr, rlcr], plot_path=out)  # duplicate name still plotted
    assert out.read_bytes().startswith(b"\x89PNG")
    assert plot_compare([rlvr], tmp_path / "none.png") is None


def test_name_with_pipe_is_escaped(tmp_path):
    save_metrics(tmp_path, summarize(RLCR_RECORDS), name="a|b", mode="two_turn")
    assert "| a\\|b |" in compare_runs([tmp_path])


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"name": "x", "mode": "rlvr"}', "missing 'count'"),
        ('{"mode": "rlvr"}', "'name' must be a string"),
    ],
)
def test_malformed_metrics_names_the_file(tmp_path, text, message):
    _write(tmp_path / "run" / METRICS_FILE, text)
    with pytest.raises(UserError, match=message) as err:
        compare_runs([tmp_path / "run"])
    assert str(tmp_path / "run" / METRICS_FILE) in str(err.value)


def test_wrong_metric_type(tmp_path):
    metrics = {"name": "x", "mode": "rlvr", **summarize(RLCR_RECORDS), "ece": "low"}
    _write(tmp_path / METRICS_FILE, json.dumps(metrics))
    with pytest.raises(UserError, match="'ece' must be a number or null"):
        load_metrics(tmp_path)


def test_missing_files(tmp_path, two_runs):
    with pytest.raises(UserError, match=f"{tmp_path / 'nope' / METRICS_FILE}: file not found"):
        compare_runs([two_runs[0], tmp_path / "nope"])
    (two_runs[0] / BINS_FILE).unlink()
    with pytest.raises(UserError, match="bins.json: file not found"):
        compare_runs(list(two_runs), plot_path=tmp_path / "p.png")
    with pytest.raises(UserError, match="no runs to compare"):
        compare_runs([])


@pytest.mark.parametrize(
    "bins, message",
    [
        ('{"bins": 3}', "'bins' list"),
        ('{"bins": [{"lower": 0, "upper": 1, "count": 1}]}', "bin 0"),
        ('{"bins": [{"lower": 0, "upper": 1, "count": 2, "mean_confidence": 1.5, '
         '"accuracy": 0.5}]}', "in \\[0, 1\\]"),
        ('{"bins": [{"lower": 0, "upper": 1, "count": 0, "mean_confidence": 0.5, '
         '"accuracy": null}]}', "empty bin"),
    ],
)
def test_malformed_bins(tmp_path, bins, message):
    _write(tmp_path / BINS_FILE, bins)
    with pytest.raises(UserError, match=message):
        load_bins(tmp_path)


def test_save_metrics_requires_every_key(tmp_path):
    with pytest.raises(ValueError, match="metrics lack"):
        save_metrics(tmp_path, {"count": 1}, name="x", mode="rlvr")
