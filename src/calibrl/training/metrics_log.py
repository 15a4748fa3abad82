"""Run logging: a JSONL metrics file always, TensorBoard by default, Weights & Biases optionally.

`metrics.jsonl` has one JSON object per logged step (`{"step": n, name: value, ...}`), resumable
runs append to it. A run resumed from the checkpoint of step s first drops the rows of the steps
after s (`truncate_log`; TensorBoard purges them), which the killed run logged but the resumed
one logs again, so no step appears twice. Sample conversations go to `samples.jsonl` and to TensorBoard as a markdown
table; reward and confidence histograms go to TensorBoard/W&B.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from calibrl.errors import UserError
from calibrl.utils.atomic import atomic_write_text
from calibrl.utils.write_errors import naming_failed_writes

METRICS_FILE = "metrics.jsonl"
SAMPLES_FILE = "samples.jsonl"


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; a null makes the gap visible instead of breaking parsers
    return value


def truncate_log(path: Path, step: int) -> None:
    """Keep the rows of a JSONL log up to `step` (a row cut short by a kill goes as well)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if line.endswith("\n") and isinstance(row, dict) and row.get("step", 0) <= step:
            kept.append(line)
    atomic_write_text(path, "".join(kept))


class MetricsLogger:
    """Fan-out of scalars, histograms and sample tables to the enabled sinks."""

    def __init__(self, run_dir: Path, *, tensorboard: bool = True, wandb: bool = False,
                 wandb_project: str = "calibrl", run_name: str | None = None,
                 config: Mapping[str, Any] | None = None, resume_step: int | None = None
                 ) -> None:
        """`resume_step`: the run continues from that step's checkpoint; later rows go."""
        self.run_dir = run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if resume_step is not None:
            for name in (METRICS_FILE, SAMPLES_FILE):
                truncate_log(run_dir / name, resume_step)
        self._metrics = (run_dir / METRICS_FILE).open("a", encoding="utf-8")
        self._samples = (run_dir / SAMPLES_FILE).open("a", encoding="utf-8")
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = None if resume_step is None else resume_step + 1
            self._tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=purge)
        self._wandb = None
        if wandb:
            try:
                import wandb as wandb_lib
            except ImportError:
                raise UserError("logging.wandb=true needs the extra: pip install 'calibrl[wandb]'"
                                ) from None
            self._wandb = wandb_lib.init(project=wandb_project, name=run_name,
                                         dir=str(run_dir), config=dict(config or {}))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        row = {"step": step, **{k: _finite_or_none(v) for k, v in metrics.items()}}
        with naming_failed_writes(self.run_dir / METRICS_FILE):  # a full disk names the file
            self._metrics.write(json.dumps(row) + "\n")
            self._metrics.flush()
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, int | float) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(dict(metrics), step=step)

    def histogram(self, step: int, name: str, values: Sequence[float]) -> None:
        values = [v for v in values if v is not None and math.isfinite(v)]
        if not values:
            return
        if self._tb is not None:
            import numpy as np

            self._tb.add_histogram(name, np.asarray(values), step)
        if self._wandb is not None:
            import wandb as wandb_lib

            self._wandb.log({name: wandb_lib.Histogram(values)}, step=step)

    def samples(self, step: int, rows: Sequence[Mapping[str, Any]]) -> None:
        """A few sample conversations (dicts with the same keys) as a table."""
        if not rows:
            return
        with naming_failed_writes(self.run_dir / SAMPLES_FILE):
            for row in rows:
                self._samples.write(json.dumps({"step": step, **row}) + "\n")
            self._samples.flush()
        if self._tb is not None:
            keys = list(rows[0])
            lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
            for row in rows:
                cells = (str(row.get(k, "")).replace("|", "\\|").replace("\n", "<br>")
                         for k in keys)
                lines.append("| " + " | ".join(cells) + " |")
            self._tb.add_text("samples", "\n".join(lines), step)
        if self._wandb is not None:
            import wandb as wandb_lib

            keys = list(rows[0])
            table = wandb_lib.Table(columns=keys, data=[[r.get(k) for k in keys] for r in rows])
            self._wandb.log({"samples": table}, step=step)

    def close(self) -> None:
        # Closing flushes what a failed write left buffered: on a full disk that fails again.
        for name, file in ((METRICS_FILE, self._metrics), (SAMPLES_FILE, self._samples)):
            with naming_failed_writes(self.run_dir / name):
                file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
