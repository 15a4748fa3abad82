"""`calibrl data short-answer`, `calibrl data multiple-choice` and `calibrl data math`: public
QA rows (TriviaQA, HotpotQA, SimpleQA; CommonsenseQA, GPQA, MMLU; GSM8K, MATH) converted to DIR/train.parquet and
DIR/test.parquet (registered in the `calibrl data` group by `cli.data_cmd`).

Besides their options they take `key=value` settings (`ConvertSettings`), e.g.
`data.columns.question=problem` for data whose question column is named `problem`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from calibrl.errors import UserError
from calibrl.settings.convert import ConvertDataSection
from calibrl.tasks import Task, get_task

SHORT_ANSWER = get_task("short_answer")
MULTIPLE_CHOICE = get_task("multiple_choice")
MATH = get_task("math")

_Out = Annotated[Path, typer.Option("--out", help="Folder for train.parquet and test.parquet.")]
_Overwrite = Annotated[bool, typer.Option(
    "--overwrite", help="Replace the splits already in --out.")]
_N = Annotated[int | None, typer.Option("--n", help="At most this many rows over both splits.")]
_TestSize = Annotated[int | None, typer.Option("--test-size", help="Rows in the test split.")]
_TestFraction = Annotated[float | None, typer.Option(
    "--test-fraction", help="Share of rows in the test split (default 0.1).")]
_PromptStyle = Annotated[str, typer.Option(
    "--prompt-style", help="'instruct' (the question and how to answer it, for pretrained "
    "models) or 'compact' (without the instruction, for a tiny model trained from scratch).")]
_ShortFrom = Annotated[str, typer.Option(
    "--from", help="A .parquet/.json/.jsonl file, a folder or a Hub data set id (org/name"
    "[:config]:split) of TriviaQA {question, answer: {value, aliases, normalized_aliases}}, "
    "HotpotQA {question, answer, level} or {question, answers} rows.")]
_ChoiceFrom = Annotated[str, typer.Option(
    "--from", help="A .parquet/.json/.jsonl file, a folder or a Hub data set id (org/name"
    "[:config]:split) of CommonsenseQA {question, choices: {label, text}, answerKey}, GPQA "
    "{Question, Correct Answer, Incorrect Answer 1..3} or {question, choices, answer} rows.")]
_MathFrom = Annotated[str, typer.Option(
    "--from", help="A .parquet/.json/.jsonl file, a folder or a Hub data set id (org/name"
    "[:config]:split) of GSM8K {question, answer: '... #### 72'}, MATH {problem, solution "
    "with \\boxed{...}, level, type} or {question, answer} rows.")]
_Shuffle = Annotated[bool, typer.Option(
    "--shuffle/--no-shuffle", help="Show each row's choices in an order drawn from --seed and "
    "the row (GPQA lists its correct answer first, so keep this on for it).")]
_Seed = Annotated[int, typer.Option("--seed", help="Seed of the choices' order.")]
_Settings = Annotated[list[str] | None, typer.Argument(
    help="Settings as dotted key=value: data.columns.TARGET=SOURCE (any number of them). "
    + ConvertDataSection.model_fields["columns"].description, show_default=False)]


def _columns(settings: list[str] | None) -> tuple[tuple[str, str], ...]:
    """The column mapping of the `key=value` settings, as the task's `columns` field holds it."""
    from calibrl.settings.convert import ConvertSettings
    from calibrl.settings.loader import load_settings

    return tuple(load_settings(ConvertSettings, None, settings or []).data.columns.items())


def _write(task: Task, from_path: str, out: Path, n: int | None, test_size: int | None,
           test_fraction: float | None, overwrite: bool) -> None:
    from calibrl.tasks.files import write_splits
    from calibrl.utils.files import check_output_dir, refuse_to_replace

    check_output_dir(out, "--out")
    refuse_to_replace(out, ("train.parquet", "test.parquet"), overwrite=overwrite)
    result = task.convert_file(from_path, n=n, test_size=test_size, test_fraction=test_fraction)
    typer.echo(f"read {result.rows_read} rows from {from_path}; dropped {result.duplicates} "
               "repeated questions")
    paths = write_splits(out, {"train": result.train, "test": result.test})
    typer.echo(f"wrote {paths['train']} ({len(result.train)} rows) and {paths['test']} "
               f"({len(result.test)} rows)")


def _check_style(task: Task, prompt_style: str) -> None:
    if prompt_style not in task.prompt_styles:
        raise UserError(f"unknown --prompt-style {prompt_style!r}; choose "
                        f"{', '.join(task.prompt_styles)}")


def short_answer(
    from_path: _ShortFrom, out: _Out, n: _N = None, test_size: _TestSize = None,
    test_fraction: _TestFraction = None,
    prompt_style: _PromptStyle = SHORT_ANSWER.prompt_styles[0], settings: _Settings = None,
    overwrite: _Overwrite = False,
) -> None:
    """Convert short-answer rows (right iff the answer matches an alias, SQuAD-normalised)."""
    _check_style(SHORT_ANSWER, prompt_style)
    task = dataclasses.replace(SHORT_ANSWER, prompt_style=prompt_style,
                               columns=_columns(settings))
    _write(task, from_path, out, n, test_size, test_fraction, overwrite)


def multiple_choice(
    from_path: _ChoiceFrom, out: _Out, n: _N = None, test_size: _TestSize = None,
    test_fraction: _TestFraction = None,
    prompt_style: _PromptStyle = MULTIPLE_CHOICE.prompt_styles[0],
    shuffle: _Shuffle = True, seed: _Seed = 0, settings: _Settings = None,
    overwrite: _Overwrite = False,
) -> None:
    """Convert multiple-choice rows (answered by the correct choice's letter or text)."""
    _check_style(MULTIPLE_CHOICE, prompt_style)
    task = dataclasses.replace(MULTIPLE_CHOICE, prompt_style=prompt_style, shuffle=shuffle,
                               shuffle_seed=seed, columns=_columns(settings))
    _write(task, from_path, out, n, test_size, test_fraction, overwrite)


def math_problems(
    from_path: _MathFrom, out: _Out, n: _N = None, test_size: _TestSize = None,
    test_fraction: _TestFraction = None,
    prompt_style: _PromptStyle = MATH.prompt_styles[0], settings: _Settings = None,
    overwrite: _Overwrite = False,
) -> None:
    """Convert math rows (right iff math-verify finds the final answer equal to the reference;
    scoring needs the extra: pip install 'calibrl[math]')."""
    _check_style(MATH, prompt_style)
    task = dataclasses.replace(MATH, prompt_style=prompt_style, columns=_columns(settings))
    _write(task, from_path, out, n, test_size, test_fraction, overwrite)
