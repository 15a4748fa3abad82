"""Figures: each function writes a non-empty PNG and refuses to plot nothing."""

from __future__ import annotations

import pytest

from calibrl.evaluation.metrics import reliability_bins, risk_coverage
from calibrl.evaluation.plots import (
    plot_confidence_histogram,
    plot_reliability,
    plot_reliability_overlay,
    plot_risk_coverage,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CONF = [0.0, 0.1, 0.3, 0.3, 0.5, 0.9, 1.0, 1.0]
CORRECT = [False, False, True, False, True, True, True, False]


def _assert_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000


def test_reliability_png(tmp_path):
    out = plot_reliability(reliability_bins(CONF, CORRECT), tmp_path / "sub" / "rel.png")
    assert out == tmp_path / "sub" / "rel.png"
    _assert_png(out)


def test_overlay_png(tmp_path):
    runs = {
        "rlcr": reliability_bins(CONF, CORRECT),
        "rlvr-ish": reliability_bins([1.0] * 4, [True, False, False, True]),
    }
    _assert_png(plot_reliability_overlay(runs, tmp_path / "overlay.png"))


def test_histogram_png(tmp_path):
    _assert_png(plot_confidence_histogram(CONF, CORRECT, tmp_path / "hist.png", n_bins=5))


def test_risk_coverage_png(tmp_path):
    curves = {
        "rlcr": risk_coverage(CONF, CORRECT)[:2],
        "constant": risk_coverage([1.0] * 4, [True, False, False, True])[:2],  # one point
    }
    _assert_png(plot_risk_coverage(curves, tmp_path / "rc.png"))


def test_nothing_to_plot(tmp_path):
    empty = reliability_bins([0.5], [True])
    empty = [b.__class__(b.lower, b.upper, 0, None, None) for b in empty]
    with pytest.raises(ValueError, match="no examples to plot"):
        plot_reliability(empty, tmp_path / "x.png")
    with pytest.raises(ValueError, match="no runs"):
        plot_reliability_overlay({}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="no runs"):
        plot_risk_coverage({}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="no examples to evaluate"):
        plot_confidence_histogram([], [], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
