"""The bootstrap over evaluated problems: against a slow reference loop, resampling whole
problems, its place in metrics.json, the tables and `calibrl eval`."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from calibrl.errors import UserError
from calibrl.evaluation.bootstrap import (
    BOOTSTRAP_METRICS,
    CALIBRATED_ECE,
    bootstrap_intervals,
    calibrated_ece,
)
from calibrl.evaluation.compare import compare_runs, interval_table
from calibrl.evaluation.metrics import aurc, auroc, brier_score, expected_calibration_error
from calibrl.evaluation.records import EvalRecord
from calibrl.evaluation.report import load_metrics, write_evaluation
from calibrl.evaluation.result import compute_evaluation
from evaluation.slow_references import pairwise_within_group_auroc


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default), written out."""
    ordered = sorted(values)
    position = q / 100 * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def _reference(conf, correct, clusters, groups, draws, seed, level):
    problems = sorted(set(clusters))
    rng = np.random.default_rng(seed)
    values = {name: [] for name in BOOTSTRAP_METRICS}
    for _ in range(draws):
        c, y, g = [], [], []
        for k in rng.integers(0, len(problems), size=len(problems)):
            for i in range(len(conf)):
                if clusters[i] == problems[k]:
                    c.append(conf[i])
                    y.append(correct[i])
                    g.append(groups[i])
        scores = {"accuracy": sum(y) / len(y), "ece": expected_calibration_error(c, y),
                  "brier": brier_score(c, y), "auroc": auroc(c, y), "aurc": aurc(c, y),
                  "within_group_auroc": pairwise_within_group_auroc(c, y, g)}
        for name, value in scores.items():
            if value is not None:
                values[name].append(value)
    tail = (1 - level) / 2 * 100
    out = {}
    for name, vals in values.items():
        mean = sum(vals) / len(vals)
        out[name] = {"se": math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)),
                     "low": _percentile(vals, tail), "high": _percentile(vals, 100 - tail),
                     "draws": len(vals)}
    return out


def test_matches_the_reference_loop():
    rng = np.random.default_rng(3)
    clusters = [f"p{i // 3}" for i in range(60)]  # 20 problems, 3 answers each
    groups = [f"{2 + (i // 3) % 3} numbers" for i in range(60)]  # a problem's answers share one
    conf = np.round(rng.uniform(0, 1, 60), 1).tolist()
    correct = (rng.uniform(0, 1, 60) < np.array(conf)).tolist()
    got = bootstrap_intervals(conf, correct, clusters, groups=groups, draws=200, seed=5,
                              level=0.9)
    want = _reference(conf, correct, clusters, groups, draws=200, seed=5, level=0.9)
    assert set(got) == set(BOOTSTRAP_METRICS)
    for name in BOOTSTRAP_METRICS:
        assert got[name]["draws"] == want[name]["draws"], name
        for key in ("se", "low", "high"):
            assert got[name][key] == pytest.approx(want[name][key], abs=1e-12), (name, key)


def test_whole_problems_are_resampled():
    # 400 problems whose two answers agree: the answers are 400 independent outcomes, not 800,
    # so accuracy's standard error is sqrt(p(1-p)/400) = 0.025, not 0.0177.
    problems = np.repeat(np.arange(400), 2)
    correct = np.repeat(np.arange(400) % 2 == 0, 2)
    got = bootstrap_intervals(np.full(800, 0.5), correct, problems, draws=2000, seed=0)
    assert got["accuracy"]["se"] == pytest.approx(0.025, rel=0.1)
    assert got["accuracy"]["low"] < 0.5 < got["accuracy"]["high"]
    assert got["ece"]["low"] >= 0.0


def test_a_metric_never_defined_is_none():
    got = bootstrap_intervals([0.9, 0.8, 0.7], [True, True, True], [0, 1, 2], draws=50)
    assert got["auroc"] is None
    assert got["accuracy"] == {"se": 0.0, "low": 1.0, "high": 1.0, "draws": 50}


@pytest.mark.parametrize("kwargs, message", [
    ({"clusters": [0, 1]}, "clusters has shape"),
    ({"draws": 0}, "draws must be positive"),
    ({"level": 1.0}, "level must be within"),
])
def test_bad_arguments(kwargs, message):
    args = {"confidences": [0.1, 0.5, 0.9], "correct": [0, 1, 1], "clusters": [0, 1, 2],
            **kwargs}
    with pytest.raises(ValueError, match=message):
        bootstrap_intervals(**args)


def _reference_calibrated_ece(conf, draws, seed, n_bins=10):
    """Outcomes drawn from the confidences one answer at a time; ECE written out per bin."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(draws):
        u = rng.random(len(conf))
        bins = {}
        for c, r in zip(conf, u, strict=True):
            b = min(int(c * n_bins), n_bins - 1)
            bins.setdefault(b, []).append((c, float(r < c)))
        values.append(sum(len(v) / len(conf) * abs(sum(c for c, _ in v) / len(v)
                                                    - sum(y for _, y in v) / len(v))
                          for v in bins.values()))
    return values


def test_calibrated_ece_matches_the_reference_loop():
    conf = np.random.default_rng(1).uniform(0, 1, 50).tolist()
    got = calibrated_ece(conf, draws=300, seed=4, level=0.9)
    want = _reference_calibrated_ece(conf, draws=300, seed=4)
    assert got["mean"] == pytest.approx(float(np.mean(want)), abs=1e-12)
    assert got["low"] == pytest.approx(_percentile(want, 5), abs=1e-12)
    assert got["high"] == pytest.approx(_percentile(want, 95), abs=1e-12)
    assert got["draws"] == 300


def test_calibrated_ece_is_the_small_sample_floor():
    # Certain confidences give certain outcomes: no floor. At 0.5 over N answers the ECE is
    # |mean(y) - 0.5|, whose mean is sqrt(0.25 / N) * sqrt(2 / pi): 0.0399 at N = 100, halved
    # at 4N: the floor a measured ECE cannot go below on average, falling as 1 / sqrt(N).
    assert calibrated_ece([0.0, 1.0] * 20, draws=50)["mean"] == 0.0
    small = calibrated_ece(np.full(100, 0.5), draws=4000)
    large = calibrated_ece(np.full(400, 0.5), draws=4000)
    assert small["mean"] == pytest.approx(0.5 / 10 * math.sqrt(2 / math.pi), rel=0.05)
    assert large["mean"] == pytest.approx(small["mean"] / 2, rel=0.08)
    assert small["low"] < small["mean"] < small["high"]


@pytest.mark.parametrize("kwargs, message", [
    ({"confidences": [0.2, 1.5]}, "within \\[0, 1\\]"),
    ({"draws": 0}, "draws must be positive"),
    ({"level": 0.0}, "level must be within"),
])
def test_calibrated_ece_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        calibrated_ece(**{"confidences": [0.1, 0.5], **kwargs})


def _records(n: int, with_confidence: bool = True) -> list[EvalRecord]:
    return [EvalRecord(correct=i % 3 == 0, confidence=(0.2 + 0.1 * (i % 5)) if with_confidence
                       else None, format_ok=True, answer_len=5,
                       conf_len=3 if with_confidence else None) for i in range(n)]


def test_metrics_json_tables_and_compare(tmp_path):
    two_turn, rlvr = tmp_path / "two_turn", tmp_path / "rlvr"
    clusters = [i // 2 for i in range(30)]
    write_evaluation(two_turn, compute_evaluation(_records(30), name="a", mode="two_turn",
                                                  with_confidence=True, clusters=clusters,
                                                  bootstrap=100))
    write_evaluation(rlvr, compute_evaluation(_records(30, False), name="b", mode="rlvr",
                                              with_confidence=False, clusters=clusters,
                                              bootstrap=100))
    saved = load_metrics(two_turn)
    assert set(saved["bootstrap"]) == {*BOOTSTRAP_METRICS, CALIBRATED_ECE}
    assert saved["bootstrap"]["ece"]["low"] <= saved["bootstrap"]["ece"]["high"]
    floor = saved["bootstrap"][CALIBRATED_ECE]
    assert floor == calibrated_ece([r.confidence for r in _records(30)], draws=100)
    assert set(load_metrics(rlvr)["bootstrap"]) == {"accuracy"}  # no confidence, no ECE

    table = interval_table([saved, load_metrics(rlvr)])
    ece = saved["bootstrap"]["ece"]
    assert f"± {ece['se']:.3f} ({ece['low']:.3f}–{ece['high']:.3f})" in table
    assert f"{floor['mean']:.3f} ({floor['low']:.3f}–{floor['high']:.3f})" in table
    assert "ECE if calibrated" in table
    assert "| b | ± " in table and "n/a" in table
    assert "Bootstrap over the evaluated problems" in compare_runs([two_turn, rlvr])

    write_evaluation(tmp_path / "none", compute_evaluation(_records(30), name="c",
                                                           mode="two_turn", with_confidence=True))
    assert "bootstrap" not in load_metrics(tmp_path / "none")
    assert interval_table([load_metrics(tmp_path / "none")]) is None


@pytest.mark.parametrize("bad", ["[]", '{"ece": 3}', '{"ece": {"se": 0.1, "low": "x"}}'])
def test_malformed_bootstrap_is_a_user_error(tmp_path, bad):
    write_evaluation(tmp_path, compute_evaluation(_records(6), name="a", mode="two_turn",
                                                  with_confidence=True))
    data = json.loads((tmp_path / "metrics.json").read_text())
    data["bootstrap"] = json.loads(bad)
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="bootstrap"):
        load_metrics(tmp_path)
