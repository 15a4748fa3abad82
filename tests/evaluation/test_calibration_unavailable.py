"""No perfect-looking calibration from nothing: when too few confidences parsed, every metric
of the stated confidence is reported as not available, with the reason, in the computed result,
metrics.json, bins.json, the tables and the figures; the unparsable share stays beside it.

(Issue 43: the real SmolLM2 model, accuracy 0 and every confidence unparsable, read
`ECE 0.0000 | Brier 0.0000`.)
"""

from __future__ import annotations

import json

import pytest

from calibrl.evaluation.compare import (
    compare_runs,
    plot_compare,
    plot_risk_coverage_compare,
    tables_text,
)
from calibrl.evaluation.metrics import (
    CONFIDENCE_METRICS,
    MIN_PARSED_SHARE,
    aurc,
    auroc,
    brier_score,
    calibration_unavailable,
    expected_calibration_error,
)
from calibrl.evaluation.report import (
    BINS_FILE,
    METRICS_FILE,
    RELIABILITY_PLOT,
    RISK_COVERAGE_FILE,
    RISK_COVERAGE_PLOT,
    load_bins,
    load_metrics,
    load_risk_coverage,
    write_evaluation,
)
from calibrl.evaluation.result import compute_evaluation
from calibrl.evaluation.summary import UNAVAILABLE, summarize


def _records(confidences, correct, group="3 numbers"):
    return [dict(correct=y, confidence=c, format_ok=False, answer_len=128, conf_len=48,
                 group=group) for c, y in zip(confidences, correct, strict=True)]


# What issue 43 measured: accuracy 0 and no confidence parsed.
NOTHING_PARSED = _records([None] * 4, [False] * 4)


def test_no_parsed_confidence_gives_no_calibration_metric():
    m = summarize(NOTHING_PARSED)
    for key in CONFIDENCE_METRICS:  # the old code: ECE 0.0, Brier 0.0, AURC 1.0, mean 0.0
        assert m[key] is None, key
    assert m[UNAVAILABLE] == "no confidence parsed (4 of 4 unparsable)"
    assert m["unparsable_confidence_rate"] == 1.0  # the share stays beside
    assert m["accuracy"] == 0.0 and m["mean_conf_len"] == 48.0


def test_the_threshold_is_half_of_the_answers():
    assert MIN_PARSED_SHARE == 0.5
    assert calibration_unavailable([True, False, False, False]) == (
        "only 1 of 4 confidences parsed; calibration needs at least half")
    assert calibration_unavailable([True, True, False, False]) is None
    below = summarize(_records([0.9, None, None, None], [True, False, True, False]))
    assert below["ece"] is None and below["unparsable_confidence_rate"] == 0.75


def test_at_the_threshold_the_numbers_are_the_ones_they_always_were():
    conf, correct = [0.9, None, 0.2, None], [True, False, False, True]
    m = summarize(_records(conf, correct))
    scored = [0.9, 0.0, 0.2, 0.0]  # unparsable ones still score 0 once enough parsed
    assert UNAVAILABLE not in m
    assert m["ece"] == expected_calibration_error(scored, correct)
    assert m["brier"] == brier_score(scored, correct)
    assert m["auroc"] == auroc(scored, correct) and m["aurc"] == aurc(scored, correct)
    assert m["mean_confidence"] == pytest.approx(sum(scored) / 4)


def test_a_group_without_confidences_is_not_available_on_its_own():
    records = (_records([0.8, 0.3, 0.6], [True, False, True], group="2 numbers")
               + _records([None, None], [False, False], group="4 numbers"))
    result = compute_evaluation(records, name="x", mode="two_turn", with_confidence=True)
    assert UNAVAILABLE not in result.metrics and result.metrics["ece"] is not None
    assert result.by_group["2 numbers"]["ece"] is not None
    assert result.by_group["4 numbers"]["ece"] is None
    assert result.by_group["4 numbers"][UNAVAILABLE] == "no confidence parsed (2 of 2 unparsable)"
    text = tables_text([{**result.to_metrics(), "name": "x", "mode": "two_turn"}])
    assert ("Calibration not available for x / 4 numbers: no confidence parsed (2 of 2 "
            "unparsable)." in text)
    assert "for x:" not in text and "x / 2 numbers" not in text


@pytest.fixture
def unavailable_run(tmp_path):
    result = compute_evaluation(NOTHING_PARSED, name="smollm", mode="two_turn",
                                with_confidence=True, clusters=[0, 1, 2, 3], bootstrap=20)
    run = tmp_path / "smollm"
    write_evaluation(run, result)
    return result, run


def test_the_result_holds_the_reason_and_no_calibration_parts(unavailable_run):
    result, _ = unavailable_run
    assert result.calibration_unavailable == "no confidence parsed (4 of 4 unparsable)"
    assert result.bins == () and result.curve is None
    assert result.within_group_auroc is None
    assert set(result.bootstrap) == {"accuracy"}  # no interval around a metric not reported
    # The references do not read the stated confidence: they are still there.
    assert result.baselines["difficulty_table"]["brier"] is not None


def test_files_say_not_available_and_why(unavailable_run):
    _, run = unavailable_run
    saved = json.loads((run / METRICS_FILE).read_text())
    assert saved["ece"] is None and saved["brier"] is None and saved["aurc"] is None
    assert saved[UNAVAILABLE] == "no confidence parsed (4 of 4 unparsable)"
    assert saved["unparsable_confidence_rate"] == 1.0
    assert saved["by_group"]["3 numbers"][UNAVAILABLE].startswith("no confidence parsed")
    assert load_metrics(run)[UNAVAILABLE] == saved[UNAVAILABLE]
    bins = json.loads((run / BINS_FILE).read_text())
    assert bins["bins"] == [] and bins[UNAVAILABLE] == saved[UNAVAILABLE]
    curve = json.loads((run / RISK_COVERAGE_FILE).read_text())
    assert curve["coverage"] == [] and curve[UNAVAILABLE] == saved[UNAVAILABLE]
    assert load_bins(run) == [] and load_risk_coverage(run) is None
    # The figures are notes saying so, not an empty or a perfect-looking diagram.
    for name in (RELIABILITY_PLOT, RISK_COVERAGE_PLOT):
        assert (run / name).stat().st_size > 0


def test_tables_show_not_available_with_the_reason(unavailable_run, tmp_path):
    _, run = unavailable_run
    text = compare_runs([run])
    row = next(line for line in text.splitlines() if line.startswith("| smollm | two_turn |"))
    assert "0.0000 | 0.0000" not in row
    cells = [c.strip() for c in row.strip("|").split("|")]
    # run, mode, n, accuracy, ECE, Brier, AUROC, within-group AUROC, AURC, mean conf, unparsable
    assert cells[4:10] == ["n/a"] * 6 and cells[10] == "1.0000"
    assert ("Calibration not available for smollm: no confidence parsed (4 of 4 unparsable)"
            in text)
    assert text.count("Calibration not available") == 1  # not again for each of its groups
    # The overlaid figures leave the run out rather than draw nothing as perfect, and say so.
    assert plot_compare([run], tmp_path / "r.png") is None
    assert plot_risk_coverage_compare([run], tmp_path / "c.png") is None
    text = compare_runs([run], plot_path=tmp_path / "r.png")
    assert text.endswith(f"not written: --plot {tmp_path / 'r.png'} (no run has calibration to "
                         "draw)\n")
    assert not (tmp_path / "r.png").exists()
