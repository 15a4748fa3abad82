"""`calibrl demo`: data -> SFT -> eval before -> two-turn RLCR -> eval after -> probe -> report.

Every stage is a function of `DemoSettings` and the stage before it, writing into `out_dir`:

    data/{train,test}.parquet   sft/model/   eval-before/   rl/<run>/   eval-after/   probe/
    report.md (+ PNG figures)

Every budget is a number of optimiser steps with a fixed seed, so two runs on one machine print the
same tables; the defaults finish in about 15 minutes on 2 CPU cores (measured wall times are in
the README). `DemoSettings.toy()` runs the same code at a size that takes seconds (the tests).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from calibrl.data import write_splits
from calibrl.data.mix import mix_by_difficulty, resample_by_difficulty
from calibrl.protocol.modes import TWO_TURN
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN
from calibrl.tasks import get_task
from calibrl.training.sft_data import SFTMix

# The tiny model reads no instructions; a short turn-2 question keeps every confidence sample short.
DEMO_CONFIDENCE_QUESTION = "How likely is it that your answer is correct?"
# The demo's task; everything task-specific below goes through its `Task` interface.
DEMO_TASK = "countdown"

# Two-turn RLCR on the warmed-up tiny model (see the README for the measured result). fp32: bf16
# autocast is emulated, and many times slower, on CPUs without AVX512-BF16/AMX. Measured on the
# demo's SFT model (benchmarks/rl/README.md): confidence advantages scaled per group (the
# default, confidence_std_scope=group) drive every confidence to "0.1"; one batch-wide scale lets them follow the accuracy;
# answer updates at full weight cost 6 points of accuracy in 25 steps, at 0.3 about 2; ranking
# (AUROC) needs about 40 steps.
RL_OVERRIDES: tuple[str, ...] = (
    f"algorithm.mode={TWO_TURN.name}", "rollout.prompts_per_step=8",
    "rollout.num_generations_answer=4",
    "rollout.num_generations_confidence=2", "rollout.temperature=1.0",
    "rollout.max_answer_tokens=48", "rollout.max_confidence_tokens=24",
    f"rollout.confidence_question={DEMO_CONFIDENCE_QUESTION}",
    "algorithm.lambda_ans=0.3", "algorithm.lambda_conf=1.0", "algorithm.confidence_std_scope=batch",
    "optim.lr=3e-4",
    "optim.scheduler=constant_with_warmup", "optim.warmup_steps=2", "optim.micro_batch_size=64",
    "optim.mixed_precision=no", "checkpoint.every=20", "logging.samples_every=10",
)


@dataclass(frozen=True)
class DemoSettings:
    """Sizes of the demo; the defaults finish on 2 CPU cores in about 15 minutes."""

    out_dir: Path = Path("outputs/demo")
    seed: int = 0
    n_problems: int = 16000
    test_size: int = 500
    # 2, 3 and 4 numbers, 2 : 2 : 1 (the test split keeps it; 2-number problems run out early,
    # so the training split is mostly 3 and 4 numbers): difficulty the confidence can rank by.
    numbers: tuple[int, int] = (2, 4)
    size_weights: tuple[float, ...] = (2.0, 2.0, 1.0)
    max_number: int = 20
    prompt_style: str = "compact"
    # The SFT data's mix: training rows resampled (easy ones repeated) so that the scarce 2-number
    # problems are a real share of the warm-up, not 2 % of it (None: the training split as is).
    sft_size_weights: tuple[float, ...] | None = (2.0, 3.0, 1.0)
    sft_problems: int = 18000
    confidence_question: str = DEMO_CONFIDENCE_QUESTION
    model_sizes: dict[str, int] = field(
        default_factory=lambda: {"hidden_size": 192, "num_layers": 4, "num_heads": 4})
    sft_steps: int = 1500
    sft_minutes: float | None = None  # an optional cap; a time budget makes runs differ
    sft_lr: float = 1.5e-3
    sft_batch_tokens: int = 1024
    # Mostly answer traces: the confidence formats are templates the model learns from a few.
    sft_mix: SFTMix = SFTMix(answer=0.9, confidence=0.05, rlcr=0.05)
    eval_examples: int = 500
    eval_samples: int = 2
    eval_temperature: float = 1.0
    eval_max_answer_tokens: int = 64
    eval_max_confidence_tokens: int = 32
    rl_steps: int = 40
    rl_overrides: tuple[str, ...] = RL_OVERRIDES
    probe_traces: int = 24
    probe_samples: int = 50

    def eval_settings(self, mode: str = TWO_TURN.name, seed: int | None = None) -> Any:
        """The `EvalSettings` every evaluation of the demo (and its recipes) uses."""
        from calibrl.evaluation.run import EvalSettings

        return EvalSettings(mode=mode, samples=self.eval_samples,
                            temperature=self.eval_temperature,
                            max_answer_tokens=self.eval_max_answer_tokens,
                            max_confidence_tokens=self.eval_max_confidence_tokens,
                            max_examples=self.eval_examples,
                            seed=self.seed if seed is None else seed,
                            confidence_question=self.confidence_question)

    @classmethod
    def toy(cls, out_dir: Path) -> DemoSettings:
        """The same pipeline at a size that runs in seconds (tests)."""
        return cls(out_dir=out_dir, n_problems=40, test_size=8, max_number=12, sft_problems=40,
                   sft_steps=3,
                   model_sizes={"hidden_size": 32, "num_layers": 1, "num_heads": 2},
                   eval_examples=8, eval_samples=1, eval_max_answer_tokens=8,
                   eval_max_confidence_tokens=6, rl_steps=2,
                   rl_overrides=RL_OVERRIDES + ("rollout.prompts_per_step=2",
                                                "rollout.num_generations_answer=2",
                                                "rollout.num_generations_confidence=2",
                                                "rollout.max_answer_tokens=8",
                                                "rollout.max_confidence_tokens=6",
                                                "optim.mixed_precision=no"),
                   probe_traces=2, probe_samples=4)


def _corrupt(expression: str, rng: random.Random) -> str:
    """A plausible wrong answer: one operator swapped."""
    ops = [i for i, ch in enumerate(expression) if ch in "+-*/"]
    if not ops:
        return expression + " + 1"
    i = rng.choice(ops)
    return expression[:i] + rng.choice([o for o in "+-*/" if o != expression[i]]) + expression[i + 1:]


def size_shares(settings: DemoSettings, weights: tuple[float, ...] | None = None
                ) -> dict[str, float]:
    """`weights` (default `size_weights`) keyed by the task's difficulty labels ("2 numbers", ...)."""
    sizes = range(settings.numbers[0], settings.numbers[1] + 1)
    weights = settings.size_weights if weights is None else weights
    task = get_task(DEMO_TASK)
    return {task.difficulty({"numbers": [1] * k}): w
            for k, w in zip(sizes, weights, strict=True)}


def stage_data_and_rewards(settings: DemoSettings, console: Console) -> dict[str, Counter]:
    """Write train/test parquet and score reference, corrupted and malformed answers."""
    task = get_task(DEMO_TASK)
    train_rows, test_rows = task.generate(
        settings.n_problems, seed=settings.seed, test_size=settings.test_size,
        style=settings.prompt_style, num_numbers=settings.numbers,
        max_number=settings.max_number, size_weights=settings.size_weights)
    data_dir = settings.out_dir / "data"
    rl_rows = mix_by_difficulty(train_rows, size_shares(settings), seed=settings.seed)
    sft_rows = train_rows
    if settings.sft_size_weights is not None:
        sft_rows = resample_by_difficulty(train_rows, size_shares(settings,
                                                                  settings.sft_size_weights),
                                          n=settings.sft_problems, seed=settings.seed)
    # One swap for the four files: a killed demo never pairs new training data with an old test set.
    write_splits(data_dir, {"train": train_rows, "test": test_rows, "rl": rl_rows,
                            "sft": sft_rows})
    console.print(f"data: {len(train_rows)} train / {len(test_rows)} test problems in "
                  f"{data_dir}; RL prompts: {len(rl_rows)} of the training problems in the test "
                  f"split's mix; SFT: {len(sft_rows)} rows of them"
                  + ("" if settings.sft_size_weights is None else
                     f", resampled to sizes {settings.sft_size_weights}"))

    rng = random.Random(settings.seed)
    kinds: dict[str, Counter] = {"reference": Counter(), "corrupted": Counter(),
                                 "no answer tag": Counter()}
    for example in test_rows:
        solution = example.extra["solution"]
        think = "\n".join(example.extra["steps"])
        prefix = f"<|im_start|>assistant\n{THINK_OPEN}\n{think}\n{THINK_CLOSE}\n"
        corrupted = _corrupt(solution, rng)
        answers = {"reference": f"{ANSWER_OPEN}{solution}{ANSWER_CLOSE}",
                   "corrupted": f"{ANSWER_OPEN}{corrupted}{ANSWER_CLOSE}",
                   "no answer tag": solution}
        for kind, answer in answers.items():
            kinds[kind][task.score(prefix + answer, example.ground_truth)] += 1

    table = Table(title="Countdown reward on the test split")
    table.add_column("answer")
    for score in ("1.0 (correct)", "0.1 (format ok)", "0 (no equation)"):
        table.add_column(score, justify="right")
    for kind, counts in kinds.items():
        table.add_row(kind, str(counts[1.0]), str(counts[0.1]), str(counts[0]))
    console.print(table)
    return kinds


def stage_sft(settings: DemoSettings) -> Path:
    """Supervised warm-up of a fresh tiny model; returns the model directory."""
    from calibrl.models import create_tiny_model
    from calibrl.training.sft_config import SFTConfig
    from calibrl.training.sft_run import run_sft

    out = settings.out_dir / "sft"
    init = create_tiny_model(out / "init", seed=settings.seed, overwrite=True,
                             **settings.model_sizes)
    data = settings.out_dir / "data"
    config = SFTConfig(data=str(data / "sft.parquet"), exclude=(str(data / "test.parquet"),),
                       out=str(out), model=str(init), overwrite=True, seed=settings.seed,
                       minutes=settings.sft_minutes, steps=settings.sft_steps,
                       lr=settings.sft_lr, batch_tokens=settings.sft_batch_tokens,
                       mix=settings.sft_mix, confidence_question=settings.confidence_question,
                       bf16=False)
    result, _ = run_sft(config)
    return Path(result.model_dir)


def stage_eval(settings: DemoSettings, model_dir: Path, name: str) -> dict[str, Any]:
    from calibrl.evaluation.run import evaluate

    return evaluate(model_dir, settings.out_dir / "data/test.parquet", settings.out_dir / name,
                    settings.eval_settings(), name=name)


def stage_rl(settings: DemoSettings, model_dir: Path) -> Path:
    """Two-turn RLCR from the warmed-up model; returns the final model directory."""
    from calibrl.training.config import load_config
    from calibrl.training.trainer import Trainer

    cfg = load_config(None, [*settings.rl_overrides, f"seed={settings.seed}",
                             f"model.path={model_dir}",
                             f"data.train_path={settings.out_dir / 'data/rl.parquet'}",
                             f"optim.total_steps={settings.rl_steps}",
                             f"logging.output_dir={settings.out_dir}", "logging.run_name=rl",
                             "checkpoint.overwrite=true"])
    return Trainer(cfg).train()


def stage_probe(settings: DemoSettings, model_dir: Path) -> dict[str, Any]:
    """Faithfulness probe of the model's own greedy chains on a few test problems."""
    from calibrl.data import load_examples
    from calibrl.models.loading import load_policy
    from calibrl.probe.config import ProbeConfig
    from calibrl.probe.runner import run_probe
    from calibrl.probe.sampler import CachedSampler
    from calibrl.rollout.hf_engine import HFEngine

    model, tokenizer = load_policy(str(model_dir))
    examples = load_examples(settings.out_dir / "data/test.parquet")[: settings.probe_traces]
    config = ProbeConfig(samples=settings.probe_samples, seed=settings.seed,
                         limit=settings.probe_traces)
    engine = HFEngine(model, tokenizer, max_batch_size=config.max_rows)
    return run_probe(CachedSampler(engine, max_rows=config.max_rows), tokenizer, examples,
                     config, settings.out_dir / "probe", trace_engine=engine, overwrite=True)


def results_text(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The before/after table, overall and per difficulty, as the console shows it."""
    from calibrl.demo.report import before_after_rows
    from calibrl.evaluation.compare import group_table, metrics_table

    rows = before_after_rows(before, after)
    return metrics_table(rows) + "\n" + (group_table(rows) or "")


def run_demo(settings: DemoSettings) -> Path:
    """Run every stage, print progress and timings, write the report; returns its path."""
    from calibrl.demo.report import write_report

    console = Console()
    settings.out_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        console.rule(f"[bold]{name}")
        start = time.perf_counter()
        value = fn()
        timings[name] = time.perf_counter() - start
        console.print(f"{name}: {timings[name]:.0f} s")
        return value

    timed("data", lambda: stage_data_and_rewards(settings, console))
    sft_model = timed("supervised warm-up", lambda: stage_sft(settings))
    before = timed("evaluation before RL", lambda: stage_eval(settings, sft_model, "eval-before"))
    rl_model = timed("two-turn RLCR", lambda: stage_rl(settings, sft_model))
    after = timed("evaluation after RL", lambda: stage_eval(settings, rl_model, "eval-after"))
    probe = timed("faithfulness probe", lambda: stage_probe(settings, sft_model))
    console.rule("[bold]results")
    console.print(results_text(before, after), markup=False, soft_wrap=True)
    report = write_report(settings.out_dir, before=before, after=after, timings=timings,
                          probe=probe, settings=settings)
    (settings.out_dir / "timings.json").write_text(json.dumps(timings, indent=2) + "\n")
    console.print(f"total {sum(timings.values()) / 60:.1f} min; report: {report.resolve()}")
    return report

