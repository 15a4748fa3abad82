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


def check_figure_path(out_path: str | Path, what: str) -> None:
    """Refuse, before any work, a figure path matplotlib cannot write (format or folder)."""
    from matplotlib.backend_bases import FigureCanvasBase

    from calibrl.errors import UserError
    from calibrl.utils.files import check_output_file

    out = Path(out_path)
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = out.suffix.lower().lstrip(".")
    if suffix and suffix not in formats:  # no suffix: matplotlib writes PNG
        raise UserError(f"{what} {out}: unknown figure format {out.suffix!r}; use one of "
                        f"{', '.join('.' + f for f in sorted(formats))}")
    check_output_file(out, what)


def save_figure(fig: Any, out_path: str | Path) -> Path:
    """Write a matplotlib `Figure` as PNG at `DPI`, creating parent folders; returns the path."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI, bbox_inches="tight")
    return out
