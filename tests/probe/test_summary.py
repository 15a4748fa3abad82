"""The streaming summary against direct numpy computations."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from calibrl.probe.config import DEFAULT_FRACTIONS
from calibrl.probe.plots import plot_curves, plot_decided
from calibrl.probe.summary import Z_95, area_over, decided_at, on_grid, summarise

GRID = list(DEFAULT_FRACTIONS)


def test_on_grid_is_a_step_interpolation():
    xs, values = [0.0, 0.4, 1.0], [0.1, 0.5, 0.9]
    assert on_grid(xs, values, [0.0, 0.3, 0.4, 0.99, 1.0]) == [0.1, 0.1, 0.5, 0.5, 0.9]
    assert on_grid([0.5, 1.0], [0.2, 0.3], [0.0, 0.5]) == [0.2, 0.2]  # before the first point
    assert on_grid([0.3, 0.1], [1.0, 0.0], [0.2]) == [0.0]  # unsorted points


def test_decided_at():
    assert decided_at(GRID, [1.0] * 11, 0.8) == 0.0
    assert decided_at(GRID, [0.0] * 10 + [1.0], 0.8) == 1.0
    assert decided_at(GRID, [0.9, 0.1] + [0.85] * 9, 0.8) == 0.2  # a dip resets it
    assert decided_at(GRID, [1.0] * 10 + [0.5], 0.8) is None


def test_area_over_the_curve():
    assert area_over(GRID, [1.0] * 11) == 0.0
    assert area_over(GRID, [0.0] * 11) == 1.0
    assert area_over(GRID, [0.0] * 10 + [1.0]) == pytest.approx(0.95)
    assert area_over(GRID, list(GRID)) == pytest.approx(0.5)
    assert area_over([1.0], [0.25]) == 0.75
    assert area_over([0.5, 1.0], [0.0, 1.0]) == pytest.approx(0.5)  # normalised by the span


def random_rows(rng: random.Random, count: int, samples: int = 10):
    rows = []
    for key in range(count):
        n = rng.randint(0, 30)
        cuts = sorted({0, n, *(rng.randint(0, n) for _ in range(3))})
        has_final = rng.random() < 0.8
        points = []
        for cut in cuts:
            correct, same = rng.randint(0, samples), rng.randint(0, samples)
            points.append({"x": cut / n if n else 0.0, "cut": cut, "confidence": correct / samples,
                           "same_answer": same / samples if has_final else None})
        stated = rng.random() if rng.random() < 0.5 else None
        rows.append({"trace": key, "samples": samples, "chain_tokens": n, "points": points,
                     "final_correct": rng.random() < 0.5, "stated_confidence": stated})
    return rows


def test_summary_matches_numpy():
    rows = random_rows(random.Random(0), 60)
    summary = summarise(iter(rows), GRID, 0.7)
    conf = np.array([on_grid([p["x"] for p in r["points"]], [p["confidence"] for p in r["points"]],
                             GRID) for r in rows])
    with_final = [r for r in rows if r["points"][0]["same_answer"] is not None]
    same = np.array([on_grid([p["x"] for p in r["points"]],
                             [p["same_answer"] for p in r["points"]], GRID) for r in with_final])
    assert summary["traces"] == 60
    np.testing.assert_allclose(summary["confidence"]["mean"], conf.mean(0))
    half = Z_95 * conf.std(0, ddof=1) / np.sqrt(len(conf))
    np.testing.assert_allclose(summary["confidence"]["lower"], np.clip(conf.mean(0) - half, 0, 1))
    np.testing.assert_allclose(summary["confidence"]["upper"], np.clip(conf.mean(0) + half, 0, 1))
    np.testing.assert_allclose(summary["same_answer"]["mean"], same.mean(0))
    assert summary["same_answer"]["traces"] == len(with_final)
    assert summary["same_answer_aoc"] == pytest.approx(area_over(GRID, list(same.mean(0))))
    decided = [decided_at(GRID, list(s), 0.7) for s in same]
    counts = summary["decided"]["counts"]
    assert counts["never"] == sum(d is None for d in decided)
    assert sum(counts.values()) == len(with_final)
    assert counts["0"] == sum(d == 0.0 for d in decided)
    stated = [(r["stated_confidence"], r["points"][-1]["confidence"]) for r in rows
              if r["stated_confidence"] is not None]
    x, y = np.array(stated).T
    assert summary["stated_confidence"]["traces"] == len(stated)
    assert summary["stated_confidence"]["pearson_r"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert summary["final_accuracy"] == pytest.approx(np.mean([r["final_correct"] for r in rows]))
    json.dumps(summary, allow_nan=False)


def test_summary_of_nothing_or_constants_has_no_nan():
    empty = summarise(iter([]), GRID, 0.8)
    assert empty["traces"] == 0 and empty["confidence"]["mean"] == [None] * 11
    one = summarise(iter(random_rows(random.Random(1), 1)), GRID, 0.8)
    assert one["confidence"]["lower"] == one["confidence"]["mean"]
    assert one["stated_confidence"]["pearson_r"] is None
    json.dumps(empty, allow_nan=False)
    json.dumps(one, allow_nan=False)


def test_plots_are_written(tmp_path):
    summary = summarise(iter(random_rows(random.Random(2), 8)), GRID, 0.8)
    assert plot_curves(summary, tmp_path / "a" / "curves.png").stat().st_size > 0
    assert plot_decided(summary, tmp_path / "decided.png").stat().st_size > 0
