"""Evaluation on held-out problems during training (`data.eval_path`, `eval.*`).

Training may not import `calibrl.evaluation` (the middle floors stay apart), so the function that
generates and scores is handed in: `calibrl train` passes
`calibrl.evaluation.during_training.held_out_evaluator(cfg)`. This module only loads the problems,
decides when an evaluation is due, and names the metrics `eval/...` for the run's logs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from calibrl.data import TaskExample
from calibrl.errors import no_rows
from calibrl.settings import TrainSettings
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples

# (model, tokenizer, examples, engine) -> metrics such as {"accuracy": 0.4, "ece": 0.1, ...}
Evaluator = Callable[[Any, Any, Sequence[TaskExample], Any], Mapping[str, float]]
PREFIX = "eval/"


@dataclass(frozen=True)
class HeldOut:
    """The held-out problems of a run and when to evaluate on them."""

    examples: list[TaskExample]
    every_steps: int
    total_steps: int
    evaluate: Evaluator

    def due(self, step: int) -> bool:
        return step % self.every_steps == 0 or step == self.total_steps

    def run(self, model: Any, tokenizer: Any, engine: Any) -> dict[str, float]:
        """The evaluator's metrics as `eval/NAME`, plus `time/eval_s`."""
        start = time.perf_counter()
        metrics = self.evaluate(model, tokenizer, self.examples, engine)
        return {**{PREFIX + name: value for name, value in metrics.items()},
                "time/eval_s": time.perf_counter() - start}


def load_held_out(cfg: TrainSettings, evaluator: Evaluator | None) -> HeldOut | None:
    """The run's `HeldOut`; problems are checked at start-up. None without `data.eval_path`,
    and (with a warning) without an evaluator."""
    path = cfg.data.eval_path
    if path is None:
        return None
    if evaluator is None:  # a library caller's Trainer(cfg); the CLI and the demo pass one
        print("warning: data.eval_path is set but the trainer was given no evaluator, so "
              "nothing is evaluated during training (pass evaluator=calibrl.evaluation."
              "during_training.held_out_evaluator(cfg))")
        return None
    examples = load_examples(path)[:cfg.eval.max_examples]
    if not examples:  # eval.max_examples > 0: the file holds none
        raise no_rows(path)
    for source in {ex.data_source for ex in examples}:
        get_task(source)
    return HeldOut(examples, cfg.eval.every_steps, cfg.optim.total_steps, evaluator)
