"""The probe's summary, computed in one pass over its rows (memory independent of their number).

Every trace's curves are read on a common grid of chain fractions (step interpolation: at `g`, a
trace shows what it showed at its last point with `x <= g`), then:

- mean confidence and mean "% same answer" per grid point, each with a 95% band
  `mean ± 1.96 · sd / sqrt(traces)` (between-trace spread; the Monte Carlo error of each trace
  is inside it), clipped to [0, 1];
- area over the mean same-answer curve (Lanham et al. 2023): `∫ (1 - same) dx` over the grid's
  span divided by that span (on the default grid 0..1, exactly the area); high = the answer
  depends on the chain, low = it was there before the chain;
- the earliest grid point from which a trace's same-answer share never drops below the
  threshold ("decided at"), as counts per grid point plus "never";
- where traces carry a stated confidence: its Pearson correlation with the probe's confidence
  at the whole chain (x = 1);
- `confidence_first` / `confidence_last`: the mean confidence curve at the grid's first and last
  points (on the default grid, fraction 0 = no chain at all and 1 = the whole chain), each as
  `{x, mean, lower, upper, traces}` with the same 95% band;
- `solved_traces`: traces whose own final answer is correct, i.e. rows with `final_correct`
  true (set where the trace is made, by the task's verifier on the full trace's answer; the
  probe's confidence at x = 1 is not used, since sampled answers can differ from the trace's);
- `decided_before_end_count` / `decided_before_end_share`: of the solved traces that have a
  same-answer curve (every solved trace has a final answer, so in practice all of them), how
  many / which share have a decided-at point (as above, same threshold) strictly before the
  grid's last point, i.e. the answer was settled before the chain ended; "never" and "decided
  only at the last point" both count as not decided before the end. None without such traces.
Traces without a final answer have no same-answer curve and are left out of those statistics.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Z_95 = 1.959963984540054


def on_grid(xs: Sequence[float], values: Sequence[float], grid: Sequence[float]) -> list[float]:
    """Step interpolation: value of the last point with `x <= g` (the first point before any)."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = []
    for g in grid:
        chosen = order[0]
        for i in order:
            if xs[i] <= g + 1e-9:
                chosen = i
        out.append(float(values[chosen]))
    return out


def decided_at(grid: Sequence[float], same: Sequence[float], threshold: float) -> float | None:
    """The earliest grid point from which `same` stays >= threshold; None if it ends below."""
    first = None
    for g, value in zip(grid, same, strict=True):
        if value >= threshold:
            first = g if first is None else first
        else:
            first = None
    return first


def area_over(grid: Sequence[float], curve: Sequence[float]) -> float:
    """Mean of `1 - curve` over the grid's span, by the trapezoid rule (one point: `1 - c`)."""
    if len(grid) == 1:
        return 1.0 - curve[0]
    area = sum((b - a) * (2.0 - ca - cb) / 2.0
               for a, b, ca, cb in zip(grid, grid[1:], curve, curve[1:], strict=False))
    return area / (grid[-1] - grid[0])


class _Moments:
    """Streaming mean and variance (Welford)."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def band(self) -> tuple[float | None, float | None, float | None]:
        """Mean and its 95% band; a single value's band is the value itself."""
        if self.n == 0:
            return None, None, None
        half = Z_95 * math.sqrt(self.m2 / (self.n - 1) / self.n) if self.n > 1 else 0.0
        return self.mean, max(0.0, self.mean - half), min(1.0, self.mean + half)


class _Pearson:
    """Streaming co-moments of pairs (x, y)."""

    def __init__(self) -> None:
        self.n, self.mx, self.my, self.sxx, self.syy, self.sxy = 0, 0.0, 0.0, 0.0, 0.0, 0.0

    def add(self, x: float, y: float) -> None:
        self.n += 1
        dx = x - self.mx
        self.mx += dx / self.n
        dy = y - self.my
        self.my += dy / self.n
        self.sxx += dx * (x - self.mx)
        self.syy += dy * (y - self.my)
        self.sxy += dx * (y - self.my)

    def r(self) -> float | None:
        if self.n < 2 or self.sxx <= 0 or self.syy <= 0:
            return None  # undefined for fewer than two traces or a constant variable
        return max(-1.0, min(1.0, self.sxy / math.sqrt(self.sxx * self.syy)))


class SummaryAccumulator:
    """Add rows one at a time (`add`), then read the summary (`result`)."""

    def __init__(self, grid: Sequence[float], threshold: float) -> None:
        self.grid = [float(g) for g in grid]
        self.threshold = threshold
        self.traces = 0
        self.final_correct = 0
        self.confidence = [_Moments() for _ in self.grid]
        self.same = [_Moments() for _ in self.grid]
        self.decided: dict[str, int] = {**{_label(g): 0 for g in self.grid}, "never": 0}
        self.stated = _Pearson()
        self.samples: set[int] = set()
        self.solved_with_curve = 0
        self.decided_before_end = 0

    def add(self, row: Mapping[str, Any]) -> None:
        points = row["points"]
        xs = [p["x"] for p in points]
        self.traces += 1
        self.final_correct += bool(row.get("final_correct"))
        self.samples.add(int(row["samples"]))
        for m, value in zip(self.confidence, on_grid(xs, [p["confidence"] for p in points],
                                                     self.grid), strict=True):
            m.add(value)
        if all(p["same_answer"] is not None for p in points):
            same = on_grid(xs, [p["same_answer"] for p in points], self.grid)
            for m, value in zip(self.same, same, strict=True):
                m.add(value)
            at = decided_at(self.grid, same, self.threshold)
            self.decided["never" if at is None else _label(at)] += 1
            if row.get("final_correct"):
                self.solved_with_curve += 1
                self.decided_before_end += at is not None and at < self.grid[-1]
        full = [p for p in points if p["cut"] == row["chain_tokens"]]
        if row.get("stated_confidence") is not None and full:
            self.stated.add(float(row["stated_confidence"]), float(full[-1]["confidence"]))

    def result(self) -> dict[str, Any]:
        conf = [m.band() for m in self.confidence]
        same = [m.band() for m in self.same]
        same_mean = [b[0] for b in same]
        decided_traces = self.same[0].n if self.same else 0
        return {
            "traces": self.traces,
            "samples_per_point": sorted(self.samples),
            "grid": self.grid,
            "final_accuracy": self.final_correct / self.traces if self.traces else None,
            "confidence": _curve(conf, self.confidence),
            "same_answer": _curve(same, self.same),
            "same_answer_aoc": (area_over(self.grid, same_mean)  # type: ignore[arg-type]
                                if decided_traces else None),
            "decided": {
                "threshold": self.threshold,
                "traces": decided_traces,
                "counts": dict(self.decided),
                "share_at_start": (self.decided[_label(self.grid[0])] / decided_traces
                                   if decided_traces else None),
                "median": _median_label(self.decided, decided_traces),
            },
            "stated_confidence": {"traces": self.stated.n, "pearson_r": self.stated.r(),
                                  "mean_stated": self.stated.mx if self.stated.n else None,
                                  "mean_probe_at_full_chain": (self.stated.my if self.stated.n
                                                               else None)},
            "confidence_first": _point(self.grid[0], conf[0], self.confidence[0]),
            "confidence_last": _point(self.grid[-1], conf[-1], self.confidence[-1]),
            "solved_traces": self.final_correct,
            "decided_before_end_count": self.decided_before_end,
            "decided_before_end_share": (self.decided_before_end / self.solved_with_curve
                                         if self.solved_with_curve else None),
        }


def summarise(rows: Iterable[Mapping[str, Any]], grid: Sequence[float], threshold: float
              ) -> dict[str, Any]:
    acc = SummaryAccumulator(grid, threshold)
    for row in rows:
        acc.add(row)
    return acc.result()


def _label(g: float) -> str:
    return f"{g:g}"


def _curve(bands: list[tuple[float | None, float | None, float | None]],
           moments: list[_Moments]) -> dict[str, Any]:
    return {"mean": [b[0] for b in bands], "lower": [b[1] for b in bands],
            "upper": [b[2] for b in bands], "traces": moments[0].n if moments else 0}


def _point(x: float, band: tuple[float | None, float | None, float | None],
           moments: _Moments) -> dict[str, Any]:
    return {"x": x, "mean": band[0], "lower": band[1], "upper": band[2], "traces": moments.n}


def _median_label(counts: Mapping[str, int], total: int) -> str | None:
    """The median decided point (a grid label or "never"), in grid order then "never"."""
    seen = 0
    for label, count in counts.items():  # insertion order: grid, then "never"
        seen += count
        if total and seen * 2 >= total:
            return label
    return None


def ends_lines(summary: Mapping[str, Any]) -> list[str]:
    """Text lines of the first/last mean confidence and of the solved traces, for printed
    reports (plain text or markdown): one place, so every report words them alike."""
    if not summary.get("traces"):
        return []
    lines = []
    first, last = summary["confidence_first"], summary["confidence_last"]
    lines.append(f"confidence at x={first['x']:g}: {_with_band(first)}; "
                 f"at x={last['x']:g}: {_with_band(last)}")
    solved, share = summary["solved_traces"], summary["decided_before_end_share"]
    line = f"solved traces: {solved} of {summary['traces']}"
    if share is not None:
        line += (f"; of these, decided before the end (x < {last['x']:g}): "
                 f"{summary['decided_before_end_count']} ({share:.0%})")
    lines.append(line)
    return lines


def _with_band(point: Mapping[str, Any]) -> str:
    return f"{point['mean']:.2f} [{point['lower']:.2f}, {point['upper']:.2f}]"
