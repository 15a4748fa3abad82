"""Run files and the comparison table: round trips, numbers in the table, UserError on bad files."""

from __future__ import annotations

import json

import pytest

from calibrl.cli.main import main
from calibrl.errors import UserError
from calibrl.evaluation.compare import compare_runs, plot_compare, plot_risk_coverage_compare
from calibrl.evaluation.metrics import reliability_bins, risk_coverage
from calibrl.evaluation.records import EvalRecord
from calibrl.evaluation.report import (
    BINS_FILE,
    HISTOGRAM_PLOT,
    METRICS_FILE,
    RELIABILITY_PLOT,
    RISK_COVERAGE_FILE,
    RISK_COVERAGE_PLOT,
    load_bins,
    load_metrics,
    load_risk_coverage,
    save_bins,
    save_metrics,
    write_evaluation,
)
from calibrl.evaluation.result import compute_evaluation
from calibrl.evaluation.summary import summarize, summarize_by_group

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
    write_evaluation(rlcr, compute_evaluation(RLCR_RECORDS, name="rlcr-2turn", mode="two_turn",
                                              with_confidence=True))
    write_evaluation(rlvr, compute_evaluation(RLVR_RECORDS, name="rlvr", mode="rlvr",
                                              with_confidence=False))
    return rlcr, rlvr


def test_write_evaluation_files(two_runs):
    rlcr, rlvr = two_runs
    for name in (METRICS_FILE, BINS_FILE, RELIABILITY_PLOT, HISTOGRAM_PLOT, RISK_COVERAGE_FILE,
                 RISK_COVERAGE_PLOT):
        assert (rlcr / name).stat().st_size > 0
    assert not (rlvr / RELIABILITY_PLOT).exists() and not (rlvr / RISK_COVERAGE_PLOT).exists()
    assert load_bins(rlvr) == [] and load_risk_coverage(rlvr) is None
    # Unparsable confidence scored 0: [.9, 0, .2, .6] vs [1, 0, 0, 1].
    coverage, risk, _ = risk_coverage([0.9, 0.0, 0.2, 0.6], [1, 0, 0, 1])
    assert load_risk_coverage(rlcr) == (coverage.tolist(), risk.tolist())
    assert "by_group" not in json.loads((rlcr / METRICS_FILE).read_text())
    assert load_metrics(rlcr) == {"name": "rlcr-2turn", "mode": "two_turn",
                                  "confidence_reading": "sampled", **summarize(RLCR_RECORDS)}


def test_bins_round_trip(tmp_path):
    bins = reliability_bins([0.0, 0.3, 0.3, 1.0], [False, True, False, True], n_bins=4)
    save_bins(tmp_path, bins)
    assert load_bins(tmp_path) == bins


def test_table_contains_the_numbers(two_runs):
    rlcr, rlvr = two_runs
    table = compare_runs([rlcr, rlvr])
    lines = table.strip().splitlines()
    assert len(lines) == 4 and lines[1].startswith("|---|---|---:")
    # Hand-computed in test_eval_metrics: ECE .175, Brier .0525, AUROC 1, AURC 5/24,
    # mean conf .425.
    # No groups: within-group AUROC is n/a.
    assert lines[2].startswith("| rlcr-2turn | two_turn | 4 | 0.5000 | 0.1750 | 0.0525 | 1.0000 "
                               "| n/a | 0.2083 |")
    assert "| 0.4250 | 0.2500 | 0.2500 | 25.0 | 5.0 |" in lines[2]
    assert lines[3] == ("| rlvr | rlvr | 3 | 0.6667 | n/a | n/a | n/a | n/a | n/a | n/a | n/a "
                        "| 0.0000 | 12.0 | n/a |")


def test_compare_plot(two_runs, tmp_path):
    rlcr, rlvr = two_runs
    out = tmp_path / "cmp.png"
    compare_runs([rlcr, rlvr, rlcr], plot_path=out)  # duplicate name still plotted
    assert out.read_bytes().startswith(b"\x89PNG")
    assert plot_compare([rlvr], tmp_path / "none.png") is None


def test_compare_risk_coverage_plot(two_runs, tmp_path):
    rlcr, rlvr = two_runs
    out = tmp_path / "rc.png"
    compare_runs([rlcr, rlvr, rlcr], risk_coverage_path=out)
    assert out.read_bytes().startswith(b"\x89PNG")
    assert plot_risk_coverage_compare([rlvr], tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_compare_cli_writes_both_plots(two_runs, tmp_path, capsys):
    rel, rc = tmp_path / "rel.png", tmp_path / "rc.png"
    main(["compare", *map(str, two_runs), "--plot", str(rel), "--risk-coverage-plot", str(rc)])
    assert "| rlcr-2turn | two_turn |" in capsys.readouterr().out
    assert rel.stat().st_size > 0 and rc.stat().st_size > 0


GROUPED = [
    EvalRecord(True, 0.9, True, 10, 4, group="10 numbers"),
    EvalRecord(False, 0.8, True, 10, 4, group="3 numbers"),
    EvalRecord(True, 0.7, True, 10, 4, group="3 numbers"),
    EvalRecord(False, 0.1, True, 10, 4, group="2 numbers"),
    EvalRecord(True, 0.6, True, 10, 4, group="2 numbers"),
]


def test_by_group_in_metrics_json_and_tables(two_runs, tmp_path):
    saved = write_evaluation(tmp_path / "g", compute_evaluation(
        GROUPED, name="g", mode="two_turn", with_confidence=True))
    data = json.loads((tmp_path / "g" / METRICS_FILE).read_text())
    assert data == saved
    assert list(data["by_group"]) == ["2 numbers", "3 numbers", "10 numbers"]
    assert data["by_group"] == summarize_by_group(GROUPED)
    new = ("name", "mode", "confidence_reading", "by_group", "within_group_auroc", "baselines")
    assert {k: v for k, v in data.items() if k not in new} == summarize(GROUPED)
    # AUROC 1 in "2 numbers", 0 in "3 numbers", undefined in "10 numbers": (2 * 1 + 2 * 0) / 4.
    assert data["within_group_auroc"] == 0.5
    # Each answer its own problem, so each is scored with the others' group accuracy:
    # "10 numbers" has no other answer and gets the others' accuracy (.5); in the two pairs each
    # answer gets its partner's outcome: [.5, 1, 0, 1, 0] against [1, 0, 1, 0, 1].
    table = data["baselines"]["difficulty_table"]
    assert table["brier"] == pytest.approx((0.25 + 4) / 5) and table["auroc"] == 0.0
    assert data["baselines"]["answer_likelihood"] is None  # the records carry none
    out = compare_runs([two_runs[0], tmp_path / "g"])
    main, groups, _fit, baselines = out.split("\n\n")
    assert len(main.strip().splitlines()) == 4
    assert "| g | difficulty table | 0.9000 | 0.8500 | 0.0000 | n/a | 0.6933 |" in baselines
    assert "| g | stated (sampled) |" in baselines
    assert "stated_expected" not in data["baselines"]  # the records carry no expected value
    lines = groups.strip().splitlines()
    assert lines[0] == "| run | group | n | accuracy ↑ | ECE ↓ | Brier ↓ | AUROC ↑ | AURC ↓ |"
    assert [line.split(" | ")[1] for line in lines[2:]] == ["2 numbers", "3 numbers",
                                                             "10 numbers"]
    # "2 numbers": conf .6 right, .1 wrong -> ECE (.4 + .1) / 2, Brier (.16 + .01) / 2, AUROC 1,
    # AURC (0 + 1/2) / 2.
    assert lines[2] == "| g | 2 numbers | 2 | 0.5000 | 0.2500 | 0.0850 | 1.0000 | 0.2500 |"
    assert lines[4].endswith("| 1 | 1.0000 | 0.1000 | 0.0100 | n/a | 0.0000 |")
    assert compare_runs(list(two_runs)).count("| group |") == 0


def test_metrics_json_from_before_aurc_still_loads(tmp_path):
    old = {k: v for k, v in summarize(RLCR_RECORDS).items() if k != "aurc"}
    _write(tmp_path / METRICS_FILE, json.dumps({"name": "old", "mode": "two_turn", **old}))
    assert load_metrics(tmp_path)["aurc"] is None
    assert "| 1.0000 | n/a | n/a | 0.4250 |" in compare_runs([tmp_path])


def test_malformed_by_group(tmp_path):
    base = {"name": "x", "mode": "two_turn", **summarize(RLCR_RECORDS)}
    _write(tmp_path / METRICS_FILE, json.dumps({**base, "by_group": {"a": {"count": 1}}}))
    with pytest.raises(UserError, match="group 'a': missing 'accuracy'"):
        load_metrics(tmp_path)
    _write(tmp_path / METRICS_FILE, json.dumps({**base, "by_group": [1]}))
    with pytest.raises(UserError, match="'by_group' must be an object"):
        load_metrics(tmp_path)


@pytest.mark.parametrize(
    "curve, message",
    [
        ('{"coverage": [1.0]}', "expected an object"),
        ('{"coverage": [1.0], "risk": [], "thresholds": []}', "differ in length"),
        ('{"coverage": [0.5, 0.5], "risk": [0, 0], "thresholds": [1, 0]}', "increase to 1"),
        ('{"coverage": [1.0], "risk": [2], "thresholds": [0.5]}', "in \\[0, 1\\]"),
    ],
)
def test_malformed_risk_coverage(tmp_path, curve, message):
    _write(tmp_path / RISK_COVERAGE_FILE, curve)
    with pytest.raises(UserError, match=message) as err:
        load_risk_coverage(tmp_path)
    assert str(tmp_path / RISK_COVERAGE_FILE) in str(err.value)


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
    with pytest.raises(UserError, match=f"{tmp_path / 'nope' / METRICS_FILE}: no such file"):
        compare_runs([two_runs[0], tmp_path / "nope"])
    (two_runs[0] / BINS_FILE).unlink()
    with pytest.raises(UserError, match="bins.json: no such file"):
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


def test_extra_scores_are_averaged_and_tabled(tmp_path):
    records = [EvalRecord(True, 0.9, True, 3, 2, group="a", extra_scores={"token_f1": 1.0}),
               EvalRecord(False, 0.2, True, 3, 2, group="a", extra_scores={"token_f1": 0.5}),
               EvalRecord(False, 0.4, True, 3, 2, group="b", extra_scores={"token_f1": 0.0})]
    saved = write_evaluation(tmp_path / "x", compute_evaluation(
        records, name="x", mode="two_turn", with_confidence=True))
    assert saved["extra_scores"] == {"token_f1": pytest.approx(0.5)}
    assert saved["by_group"]["a"]["extra_scores"] == {"token_f1": pytest.approx(0.75)}
    header = compare_runs([tmp_path / "x"]).splitlines()[0]
    assert header.startswith("| run | mode | n | accuracy ↑ | token_f1 ↑ | ECE ↓ |")
    # tasks without extra scores keep the table they had
    plain = write_evaluation(tmp_path / "y", compute_evaluation(
        RLCR_RECORDS, name="y", mode="two_turn", with_confidence=True))
    assert "extra_scores" not in plain
