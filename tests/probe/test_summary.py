"""The streaming summary against direct numpy computations."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from matplotlib.figure import Figure

from calibrl.probe.plots import _mark_ends, plot_curves, plot_decided
from calibrl.probe.summary import Z_95, area_over, decided_at, ends_lines, on_grid, summarise
from calibrl.settings.probe import DEFAULT_FRACTIONS

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
    for key, i in (("confidence_first", 0), ("confidence_last", -1)):
        assert summary[key]["x"] == GRID[i] and summary[key]["traces"] == 60
        assert summary[key]["mean"] == pytest.approx(conf.mean(0)[i])
        assert summary[key]["lower"] == pytest.approx(max(0.0, conf.mean(0)[i] - half[i]))
        assert summary[key]["upper"] == pytest.approx(min(1.0, conf.mean(0)[i] + half[i]))
    solved = [d for r, d in zip(with_final, decided, strict=True) if r["final_correct"]]
    early = sum(d is not None and d < 1.0 for d in solved)
    assert summary["solved_traces"] == sum(r["final_correct"] for r in rows)
    assert summary["decided_before_end_count"] == early
    assert summary["decided_before_end_share"] == pytest.approx(early / len(solved))
    json.dumps(summary, allow_nan=False)


def test_summary_of_nothing_or_constants_has_no_nan():
    empty = summarise(iter([]), GRID, 0.8)
    assert empty["traces"] == 0 and empty["confidence"]["mean"] == [None] * 11
    one = summarise(iter(random_rows(random.Random(1), 1)), GRID, 0.8)
    assert one["confidence"]["lower"] == one["confidence"]["mean"]
    assert one["stated_confidence"]["pearson_r"] is None
    assert empty["confidence_first"]["mean"] is None and empty["solved_traces"] == 0
    assert empty["decided_before_end_share"] is None and ends_lines(empty) == []
    json.dumps(empty, allow_nan=False)
    json.dumps(one, allow_nan=False)


def test_plots_are_written(tmp_path):
    summary = summarise(iter(random_rows(random.Random(2), 8)), GRID, 0.8)
    assert plot_curves(summary, tmp_path / "a" / "curves.png").stat().st_size > 0
    assert plot_decided(summary, tmp_path / "decided.png").stat().st_size > 0


def hand_row(key, xs, confidence, same, final_correct):
    """A row of a 10-token chain; `same=None`: the trace gave no final answer."""
    points = [{"x": x, "cut": round(10 * x), "confidence": c,
               "same_answer": None if same is None else same[i]}
              for i, (x, c) in enumerate(zip(xs, confidence, strict=True))]
    return {"trace": key, "samples": 10, "chain_tokens": 10, "points": points,
            "final_correct": final_correct, "stated_confidence": None}


# Worked by hand (threshold 0.8). Confidence at x = 0: 0, 0.5, 0 -> mean 1/6, sd sqrt(1/12),
# standard error 1/6. At x = 1: 1, 0.25, 1 -> mean 0.75, sd sqrt(0.1875), standard error 0.25.
# Decided at: A 0.3 (0.9 from 0.3 on), B 1.0 (0.5 until then), C 0 but C is not solved.
THREE = [hand_row(0, [0.0, 0.3, 1.0], [0.0, 0.5, 1.0], [0.2, 0.9, 1.0], True),
         hand_row(1, [0.0, 0.5, 1.0], [0.5, 0.5, 0.25], [0.1, 0.5, 1.0], True),
         hand_row(2, [0.0, 0.5, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0], False)]


def test_first_and_last_confidence_and_decided_before_end_by_hand():
    summary = summarise(iter(THREE), GRID, 0.8)
    assert summary["decided"]["counts"]["0.3"] == 1 and summary["decided"]["counts"]["1"] == 1
    first, last = summary["confidence_first"], summary["confidence_last"]
    assert (first["x"], first["traces"], last["x"], last["traces"]) == (0.0, 3, 1.0, 3)
    assert first["mean"] == pytest.approx(1 / 6) and first["lower"] == 0.0  # clipped
    assert first["upper"] == pytest.approx((1 + Z_95) / 6)
    assert last["mean"] == pytest.approx(0.75) and last["upper"] == 1.0  # clipped
    assert last["lower"] == pytest.approx(0.75 - 0.25 * Z_95)
    assert summary["solved_traces"] == 2
    assert summary["decided_before_end_count"] == 1
    assert summary["decided_before_end_share"] == 0.5


def test_solved_is_the_traces_own_flag_not_the_probe_confidence():
    rows = [hand_row(0, [0.0, 1.0], [0.0, 0.0], [1.0, 1.0], True),  # solved, probe says 0
            hand_row(1, [0.0, 1.0], [1.0, 1.0], [1.0, 1.0], False),  # unsolved, probe says 1
            {**hand_row(2, [0.0, 1.0], [1.0, 1.0], [1.0, 1.0], True), "final_correct": None}]
    summary = summarise(iter(rows), GRID, 0.8)
    assert summary["solved_traces"] == 1
    assert summary["decided_before_end_count"] == 1
    assert summary["decided_before_end_share"] == 1.0


def test_decided_before_end_is_strictly_before_the_last_point():
    rows = [hand_row(0, [0.0, 0.9, 1.0], [0.0] * 3, [0.0, 0.8, 1.0], True),  # at 0.9: counts
            hand_row(1, [0.0, 1.0], [0.0] * 2, [0.0, 0.8], True),  # at 1 only: does not
            hand_row(2, [0.0, 1.0], [0.0] * 2, [1.0, 0.7], True),  # never: does not
            hand_row(3, [0.0, 1.0], [0.0] * 2, None, True)]  # no curve: not in the share
    summary = summarise(iter(rows), GRID, 0.8)
    assert summary["decided"]["counts"]["0.9"] == 1 and summary["decided"]["counts"]["1"] == 1
    assert summary["solved_traces"] == 4
    assert summary["decided_before_end_count"] == 1
    assert summary["decided_before_end_share"] == pytest.approx(1 / 3)
    # on a grid ending at 0.9 the first trace is decided only at the grid's last point
    short = summarise(iter(rows[:1]), [0.0, 0.5, 0.9], 0.8)
    assert short["confidence_last"]["x"] == 0.9 and short["decided_before_end_count"] == 0


def test_a_single_trace_has_a_band_of_zero_width():
    summary = summarise(iter([hand_row(0, [0.0, 0.5, 1.0], [0.3, 0.4, 0.7], None, False)]),
                        GRID, 0.8)
    assert summary["confidence_first"] == {"x": 0.0, "mean": 0.3, "lower": 0.3, "upper": 0.3,
                                           "traces": 1}
    assert summary["confidence_last"] == {"x": 1.0, "mean": 0.7, "lower": 0.7, "upper": 0.7,
                                          "traces": 1}
    assert summary["solved_traces"] == 0 and summary["decided_before_end_share"] is None


def test_ends_lines_and_plot_marks():
    summary = summarise(iter(THREE), GRID, 0.8)
    assert ends_lines(summary) == [
        "confidence at x=0: 0.17 [0.00, 0.49]; at x=1: 0.75 [0.26, 1.00]",
        "solved traces: 2 of 3; of these, decided before the end (x < 1): 1 (50%)"]
    ax = Figure().subplots()
    _mark_ends(ax, summary)
    assert [t.get_text() for t in ax.texts] == ["0.17", "0.75"]
    assert [tuple(line.get_xydata()[0]) for line in ax.lines] == [(0.0, pytest.approx(1 / 6)),
                                                                   (1.0, 0.75)]
    older = Figure().subplots()  # a summary.json from before these keys: nothing to mark
    _mark_ends(older, {k: v for k, v in summary.items() if not k.startswith("confidence_")})
    assert len(older.texts) == 0 and len(older.lines) == 0
