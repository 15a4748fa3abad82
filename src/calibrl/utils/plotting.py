"""The figure style evaluation and the probe share: colours, resolution, and how a figure is saved.

Kept below both packages so that neither imports the other for its look. Matplotlib itself is
imported by the plotting modules, not here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CORRECT_COLOR = "#1b9e77"  # correct answers, and the confidence curve of the probe
WRONG_COLOR = "#d95f02"  # wrong answers, and the probe's "same answer" curve
BAR_COLOR = "#4c72b0"  # neutral bars (accuracy per bin, decided-at counts)
DPI = 120


def save_figure(fig: Any, out_path: str | Path) -> Path:
    """Write a matplotlib `Figure` as PNG at `DPI`, creating parent folders; returns the path."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI, bbox_inches="tight")
    return out
