"""`calibrl demo`: data -> SFT -> eval before -> confidence warm-up -> eval -> two-turn RLCR ->
eval after -> probe -> report.

The driver of the recipe `configs/demo.yaml` (`DemoSettings`): every stage is a function of the
settings and the stage before it, writing into `out_dir`:

    data/{train,test}.parquet   sft/model/   eval-before/   calibrate/model/   eval-calibrated/
    rl/<run>/   eval-after/   probe/   report.md (+ PNG figures)

A recipe without a `calibrate` section (or with `calibrate.steps: 0`) starts RL from the SFT
model and has no `calibrate/` and `eval-calibrated/`.

Every number is in the recipe; the tests run the same code with a few overrides that make it
take seconds.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from calibrl.demo.facts import (
    FACTS_TASK,
    FactsDemoSettings,
    facts_intro,
    is_facts_recipe,
    stage_facts_data,
)
from calibrl.demo.real import (
    HELD_OUT_EVAL,
    REAL_HEADING,
    RealDemoSettings,
    is_real_recipe,
    real_intro,
    real_stage_rows,
    run_real_demo,
)
from calibrl.demo.stages import describe_model, stage_calibrate, stage_eval, stage_rl
from calibrl.demo.tables import reward_table
from calibrl.errors import Stopped, UserError, already_holds
from calibrl.protocol.completions import CHATML_ASSISTANT
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN
from calibrl.settings import DemoSettings, load_settings
from calibrl.settings.loader import read_yaml
from calibrl.tasks import get_task
from calibrl.tasks.files import write_splits
from calibrl.tasks.mix import mix_by_difficulty, resample_by_difficulty
from calibrl.utils.atomic import atomic_write_text

# The demo's task; everything task-specific below goes through its `Task` interface.
DEMO_TASK = "countdown"
# The recipe in a source checkout (an editable install, as `make demo` makes); a wheel does not
# ship `configs/`, so an installed package is given the recipe with --config.
RECIPE = Path(__file__).resolve().parents[3] / "configs" / "demo.yaml"


def load_demo_settings(path: str | Path | None = None, overrides: list[str] | None = None,
                       options: dict[str, Any] | None = None
                       ) -> DemoSettings | FactsDemoSettings:
    """The recipe at `path` (default: `RECIPE`) with `options` and `key=value` overrides; a
    recipe with `recipe: facts` is the facts demo's (`calibrl.demo.facts`)."""
    if path is None:
        if not RECIPE.is_file():
            raise UserError(f"the demo recipe {RECIPE} is not here (configs/ is not installed "
                            "with the package); pass --config PATH/TO/configs/demo.yaml")
        path = RECIPE
    tree = read_yaml(path)
    kind = (FactsDemoSettings if is_facts_recipe(tree) else RealDemoSettings
            if is_real_recipe(tree) else DemoSettings)
    return load_settings(kind, path, overrides, options)


def _corrupt(expression: str, rng: random.Random) -> str:
    """A plausible wrong answer: one operator swapped."""
    ops = [i for i, ch in enumerate(expression) if ch in "+-*/"]
    if not ops:
        return expression + " + 1"
    i = rng.choice(ops)
    return expression[:i] + rng.choice([o for o in "+-*/" if o != expression[i]]) + expression[i + 1:]


def size_shares(settings: DemoSettings, weights: tuple[float, ...] | None = None
                ) -> dict[str, float]:
    """`weights` (default `data.size_weights`) keyed by the task's difficulty labels
    ("2 numbers", ...)."""
    sizes = range(settings.data.numbers[0], settings.data.numbers[1] + 1)
    weights = settings.data.size_weights if weights is None else weights
    task = get_task(DEMO_TASK)
    return {task.difficulty({"numbers": [1] * k}): w
            for k, w in zip(sizes, weights, strict=True)}


def stage_data_and_rewards(settings: DemoSettings, console: Console) -> dict[str, Counter]:
    """Write train/test parquet and score reference, corrupted and malformed answers."""
    task, data = get_task(DEMO_TASK), settings.data
    train_rows, test_rows = task.generate(
        data.n_problems, seed=settings.seed, test_size=data.test_size,
        style=data.prompt_style, num_numbers=data.numbers,
        max_number=data.max_number, size_weights=data.size_weights)
    data_dir = Path(settings.out_dir) / "data"
    rl_rows = mix_by_difficulty(train_rows, size_shares(settings), seed=settings.seed)
    sft_rows = train_rows
    if data.sft_size_weights is not None:
        sft_rows = resample_by_difficulty(train_rows, size_shares(settings,
                                                                  data.sft_size_weights),
                                          n=data.sft_problems, seed=settings.seed)
    # One swap for the four files: a killed demo never pairs new training data with an old test set.
    write_splits(data_dir, {"train": train_rows, "test": test_rows, "rl": rl_rows,
                            "sft": sft_rows})
    console.print(f"data: {len(train_rows)} train / {len(test_rows)} test problems in "
                  f"{data_dir}; RL prompts: {len(rl_rows)} of the training problems in the test "
                  f"split's mix; SFT: {len(sft_rows)} rows of them"
                  + ("" if data.sft_size_weights is None else
                     f", resampled to sizes {data.sft_size_weights}"))

    rng = random.Random(settings.seed)
    kinds: dict[str, Counter] = {"reference": Counter(), "corrupted": Counter(),
                                 "no answer tag": Counter()}
    for example in test_rows:
        solution = example.extra["solution"]
        think = "\n".join(example.extra["steps"])
        prefix = f"{CHATML_ASSISTANT}\n{THINK_OPEN}\n{think}\n{THINK_CLOSE}\n"
        corrupted = _corrupt(solution, rng)
        answers = {"reference": f"{ANSWER_OPEN}{solution}{ANSWER_CLOSE}",
                   "corrupted": f"{ANSWER_OPEN}{corrupted}{ANSWER_CLOSE}",
                   "no answer tag": solution}
        for kind, answer in answers.items():
            kinds[kind][task.score(prefix + answer, example.ground_truth)] += 1

    console.print(reward_table("Countdown reward on the test split", kinds, "no equation"))
    return kinds


def stage_sft(settings: DemoSettings | FactsDemoSettings) -> Path:
    """Supervised warm-up of a fresh tiny model; returns the model directory."""
    from calibrl.models import create_tiny_model
    from calibrl.settings import SFTSettings
    from calibrl.training.sft_run import run_sft

    out, data = Path(settings.out_dir) / "sft", Path(settings.out_dir) / "data"
    facts = isinstance(settings, FactsDemoSettings)
    init = create_tiny_model(out / "init", seed=settings.seed, overwrite=True,
                             task=FACTS_TASK if facts else DEMO_TASK,
                             **settings.model.model_dump())
    # The facts demo's test split asks about facts its warm-up shows, on purpose; Countdown's
    # test problems are held out of the warm-up.
    held_out = () if facts else (str(data / "test.parquet"),)
    config = SFTSettings.create(**settings.sft.model_dump(), data=str(data / "sft.parquet"),
                                exclude=held_out, out=str(out), model=str(init), overwrite=True)
    result, _ = run_sft(config)
    return Path(result.model_dir)


def stage_probe(settings: DemoSettings, model_dir: Path) -> dict[str, Any]:
    """Faithfulness probe of the model's own greedy chains on a few test problems."""
    from calibrl.models.loading import load_policy
    from calibrl.probe.runner import run_probe
    from calibrl.probe.sampler import CachedSampler
    from calibrl.rollout.factory import make_engine
    from calibrl.tasks.files import load_examples

    out, config = Path(settings.out_dir), settings.probe
    model, tokenizer = load_policy(str(model_dir))
    examples = load_examples(out / "data/test.parquet")[: config.limit]
    engine = make_engine("hf", model, tokenizer, max_batch_size=config.max_rows,
                         decode=config.decode)
    return run_probe(CachedSampler(engine, max_rows=config.max_rows), tokenizer, examples,
                     config, out / "probe", trace_engine=engine, overwrite=True)


def countdown_intro(settings: DemoSettings, count: Any) -> str:
    """The report's opening line: the problems and the evaluation."""
    data = settings.data
    return (f"Tiny Countdown model, {data.numbers[0]}–{data.numbers[1]} numbers in "
            f"1..{data.max_number}; evaluation on {count} answers ({settings.eval.samples} per "
            f"held-out problem, temperature {settings.eval.temperature}).\n")


# What a demo leaves in its folder (module docstring): one of them there means a demo ran.
DEMO_ENTRIES = ("data", "eval-zero-shot", "sft", "eval-before", "calibrate", "eval-calibrated",
                "rl", "eval-after", HELD_OUT_EVAL, "probe", "report.md", "timings.json")


def run_demo(settings: DemoSettings | FactsDemoSettings | RealDemoSettings, *,
             overwrite: bool = False) -> Path:
    """Run every stage, print progress and timings, write the report; returns its path. The
    facts demo has its own data stage and no probe. A folder that holds a demo is replaced
    only with `overwrite` (every stage then replaces its own output)."""
    from calibrl.demo.report import STAGE_NAMES, stage_rows

    console = Console()
    out = Path(settings.out_dir)
    if not overwrite and any((out / name).exists() for name in DEMO_ENTRIES):
        raise already_holds(out, "a demo")
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        console.rule(f"[bold]{name}")
        start = time.perf_counter()
        try:
            value = fn()
        except Stopped as stop:
            stop.advice = "the demo has no --resume: run it again with --overwrite to start over"
            raise
        timings[name] = time.perf_counter() - start
        console.print(f"{name}: {timings[name]:.0f} s")
        return value

    if isinstance(settings, RealDemoSettings):
        results = run_real_demo(settings, timed, console)
        return _finish(out, console, timings, real_stage_rows(results), list(results),
                       real_intro(settings, results), REAL_HEADING)
    facts = isinstance(settings, FactsDemoSettings)
    data_stage = stage_facts_data if facts else stage_data_and_rewards
    timed("data", lambda: data_stage(settings, console))
    sft_model = timed("supervised warm-up", lambda: stage_sft(settings))
    console.print(describe_model(sft_model))
    before = timed("evaluation before RL", lambda: stage_eval(settings, sft_model, "eval-before"))
    rl_start, calibrated = sft_model, None
    if settings.calibrate is not None and settings.calibrate.steps > 0:
        rl_start = timed("confidence warm-up", lambda: stage_calibrate(settings, sft_model))
        calibrated = timed("evaluation after the confidence warm-up",
                           lambda: stage_eval(settings, rl_start, "eval-calibrated"))
    rl_model = timed("two-turn RLCR", lambda: stage_rl(settings, rl_start))
    after = timed("evaluation after RL", lambda: stage_eval(settings, rl_model, "eval-after"))
    probe = None if facts else timed("faithfulness probe",
                                     lambda: stage_probe(settings, sft_model))
    intro = (facts_intro if facts else countdown_intro)(settings, before.get("count"))
    stages = ["eval-before", "eval-calibrated", "eval-after"] if calibrated else [
        "eval-before", "eval-after"]
    heading = ("Answer warm-up, confidence warm-up, RL" if calibrated
               else "Before and after RL")
    rows = stage_rows({STAGE_NAMES["before"]: before, STAGE_NAMES["calibrated"]: calibrated,
                       STAGE_NAMES["after"]: after})
    return _finish(out, console, timings, rows, stages, intro, heading, probe)


def _finish(out: Path, console: Console, timings: dict[str, float], rows: list[dict],
            stages: list[str], intro: str, heading: str, probe: dict[str, Any] | None = None
            ) -> Path:
    """Print the stages' tables, write the report and the timings; returns the report path."""
    from calibrl.demo.report import write_report
    from calibrl.evaluation.compare import tables_text

    console.rule("[bold]results")
    console.print(tables_text(rows), markup=False, soft_wrap=True)
    report = write_report(out, rows=rows, eval_dirs=[out / name for name in stages],
                          timings=timings, probe=probe, intro=intro, heading=heading)
    atomic_write_text(out / "timings.json", json.dumps(timings, indent=2) + "\n")
    console.print(f"total {sum(timings.values()) / 60:.1f} min; report: {report.resolve()}")
    return report

