"""`calibrl demo`, stage by stage.

Stage 1 (this module so far): generate Countdown data and score reference solutions and their
corruptions with the shared verifier, so a newcomer sees the reward's three outcomes.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from calibrl.data import examples_from_instances, write_examples
from calibrl.tasks.countdown import compute_score
from calibrl.tasks.countdown.generate import generate_countdown


@dataclass(frozen=True)
class DemoSettings:
    """Sizes of the demo; the defaults finish on 2 CPU cores."""

    out_dir: Path = Path("outputs/demo")
    n_problems: int = 600
    test_size: int = 100
    max_number: int = 20
    seed: int = 0


def _corrupt(expression: str, rng: random.Random) -> str:
    """A plausible wrong answer: one operator swapped."""
    ops = [i for i, ch in enumerate(expression) if ch in "+-*/"]
    if not ops:
        return expression + " + 1"
    i = rng.choice(ops)
    return expression[:i] + rng.choice([o for o in "+-*/" if o != expression[i]]) + expression[i + 1:]


def stage_data_and_rewards(settings: DemoSettings, console: Console) -> dict[str, Counter]:
    """Write train/test parquet and score reference, corrupted and malformed answers."""
    train, test = generate_countdown(settings.n_problems, num_numbers=(3, 4),
                                     max_number=settings.max_number, seed=settings.seed,
                                     test_size=settings.test_size)
    data_dir = settings.out_dir / "data"
    write_examples(data_dir / "train.parquet", examples_from_instances(train, "train"))
    write_examples(data_dir / "test.parquet", examples_from_instances(test, "test"))
    console.print(f"data: {len(train)} train / {len(test)} test problems in {data_dir}")

    rng = random.Random(settings.seed)
    kinds: dict[str, Counter] = {"reference": Counter(), "corrupted": Counter(),
                                 "no answer tag": Counter()}
    for inst in test:
        truth = inst.ground_truth
        prefix = "<|im_start|>assistant\n<think>\n" + "\n".join(inst.solution.steps) + "\n</think>\n"
        answers = {"reference": f"<answer>{inst.solution.expression}</answer>",
                   "corrupted": f"<answer>{_corrupt(inst.solution.expression, rng)}</answer>",
                   "no answer tag": inst.solution.expression}
        for kind, answer in answers.items():
            kinds[kind][compute_score(prefix + answer, truth)] += 1

    table = Table(title="Countdown reward on the test split")
    table.add_column("answer")
    for score in ("1.0 (correct)", "0.1 (format ok)", "0 (no equation)"):
        table.add_column(score, justify="right")
    for kind, counts in kinds.items():
        table.add_row(kind, str(counts[1.0]), str(counts[0.1]), str(counts[0]))
    console.print(table)
    return kinds


def run_demo(settings: DemoSettings) -> Path:
    console = Console()
    settings.out_dir.mkdir(parents=True, exist_ok=True)
    stage_data_and_rewards(settings, console)
    console.print(f"demo output: {settings.out_dir.resolve()}")
    return settings.out_dir
