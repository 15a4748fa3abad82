"""What both sides of the train-step benchmark share: the run spec, memory probes, the result row.

Each side runs in its own process (`calibrl_side.py`, `trl_side.py`), reads a `Spec` from JSON
and writes a `SideResult` as JSON, so neither library's imports, caches or thread pools leak into
the other's numbers.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Spec:
    """One matched configuration, given identically to both sides."""

    model_dir: str
    train_path: str
    work_dir: str
    prompts: int = 8  # prompts per step
    group: int = 4  # completions per prompt (GRPO group size)
    max_tokens: int = 64  # max completion tokens
    micro_batch: int = 32  # rows per forward/backward
    temperature: float = 1.0
    lr: float = 5e-5
    precision: str = "fp32"  # "fp32" or "bf16" (autocast over fp32 weights, both sides)
    threads: int = 2
    warmup_steps: int = 1
    steps: int = 5
    seed: int = 0
    shared_context: bool = True  # calibrl: each distinct context encoded once (optim.shared_context)
    skip_rows: bool = True  # calibrl: rows without a gradient left out (optim.skip_rows_without_gradient)

    @property
    def rows(self) -> int:
        return self.prompts * self.group

    @classmethod
    def load(cls, path: str | Path) -> Spec:
        return cls(**json.loads(Path(path).read_text()))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")


@dataclass
class StepTime:
    """One optimiser step: wall time, its generation part (sampling + rewards + advantages),
    the rest (log-probs, loss, backward, optimiser), completion tokens generated, and the CPU
    time of the process over the step and its generation part (all threads; with one thread,
    insensitive to other work on a shared machine, unlike wall time)."""

    step_s: float
    gen_s: float
    train_s: float
    gen_tokens: int
    step_cpu_s: float
    gen_cpu_s: float
    score_s: float | None = None  # calibrl only: reward scoring, `score_tree` (inside gen_s)
    optimizer_s: float | None = None  # calibrl only: clip + optimiser + scheduler (in train_s)
    rows_trained: float | None = None  # calibrl only: share of rows with a gradient

    @property
    def train_cpu_s(self) -> float:
        return self.step_cpu_s - self.gen_cpu_s


@dataclass
class SideResult:
    side: str
    steps: list[StepTime] = field(default_factory=list)  # warm-up steps included, flagged below
    warmup_steps: int = 0
    rss_before_mb: float = 0.0  # after imports and model load, before the first step
    peak_rss_mb: float = 0.0  # whole child process, ru_maxrss
    threads: int = 0  # torch threads at the end (checks nothing reset them)
    versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> SideResult:
        raw = json.loads(Path(path).read_text())
        raw["steps"] = [StepTime(**s) for s in raw["steps"]]
        return cls(**raw)

    def measured(self) -> list[StepTime]:
        return self.steps[self.warmup_steps:]

    def summary(self, rows_per_step: int) -> dict[str, float]:
        """Medians over the measured (post-warm-up) steps, plus memory."""
        steps = self.measured()
        med = {k: statistics.median(getattr(s, k) for s in steps)
               for k in ("step_s", "gen_s", "train_s", "step_cpu_s", "gen_cpu_s", "train_cpu_s",
                         "gen_tokens")}
        for key in ("score_s", "optimizer_s", "rows_trained"):
            if all(getattr(s, key) is not None for s in steps):
                med[key] = statistics.median(getattr(s, key) for s in steps)
        tokens = sum(s.gen_tokens for s in steps)
        return {**med, "tokens_per_row": tokens / (len(steps) * rows_per_step),
                "gen_tokens_per_s": tokens / sum(s.gen_s for s in steps),
                "rss_before_mb": self.rss_before_mb, "peak_rss_mb": self.peak_rss_mb,
                "peak_minus_before_mb": self.peak_rss_mb - self.rss_before_mb}


def current_rss_mb() -> float:
    """Resident set size now (Linux /proc); ru_maxrss only gives the peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    """Peak resident set size of this process (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def versions(*modules: str) -> dict[str, str]:
    import importlib

    out = {"python": sys.version.split()[0]}
    for name in modules:
        out[name] = getattr(importlib.import_module(name), "__version__", "?")
    return out
