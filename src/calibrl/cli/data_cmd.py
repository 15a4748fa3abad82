"""`calibrl data ...`: build data sets as DIR/train.parquet and DIR/test.parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from calibrl.cli.data_qa_files_cmd import math_problems, multiple_choice, short_answer
from calibrl.errors import UserError
from calibrl.tasks import get_task

COUNTDOWN = get_task("countdown")  # the task `calibrl data countdown` builds data for
DEFAULTS = COUNTDOWN.generate_options

app = typer.Typer(help="Build data sets (verl/TinyZero parquet).", no_args_is_help=True,
                  rich_markup_mode=None)  # help text as written: "calibrl[math]" is no markup


def _fmt(bounds: tuple[int, int]) -> str:
    return f"{bounds[0]}..{bounds[1]}"


def parse_weights(text: str, option: str) -> tuple[float, ...]:
    """`"1,2,1"` -> (1.0, 2.0, 1.0); anything else is a `UserError` naming `option`."""
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"{option} expects comma-separated numbers, got {text!r}") from None


def parse_range(text: str, option: str) -> tuple[int, int]:
    """`"3..4"` -> (3, 4) and `"4"` -> (4, 4); anything else is a `UserError` naming `option`."""
    parts = text.split("..")
    try:
        if len(parts) == 1:
            return int(parts[0]), int(parts[0])
        if len(parts) == 2:
            return int(parts[0]), int(parts[1])
    except ValueError:
        pass
    raise UserError(f"{option} expects LO..HI or a single integer, got {text!r}")


def _generation_options(numbers: str | None, size_weights: str | None, targets: str | None,
                        max_number: int | None, seed: int | None) -> dict:
    """The options given on the command line, as keywords of `Task.generate`."""
    options: dict = {}
    if numbers is not None:
        options["num_numbers"] = parse_range(numbers, "--numbers")
    if size_weights is not None:
        options["size_weights"] = parse_weights(size_weights, "--size-weights")
    if targets is not None:
        options["target_range"] = parse_range(targets, "--targets")
    if max_number is not None:
        options["max_number"] = max_number
    if seed is not None:
        options["seed"] = seed
    return options


# The options of `countdown`, declared here so the command reads as what it does.
_Out = Annotated[Path, typer.Option("--out", help="Folder for train.parquet and test.parquet.")]
_Overwrite = Annotated[bool, typer.Option(
    "--overwrite", help="Replace the splits already in --out.")]
_N = Annotated[
    int | None, typer.Option("--n", help="Rows over both splits; with --from, at most this many.")
]
_Numbers = Annotated[
    str | None,
    typer.Option(
        "--numbers",
        help=f"Numbers per instance, LO..HI (default {_fmt(DEFAULTS['num_numbers'])}).",
    ),
]
_SizeWeights = Annotated[
    str | None,
    typer.Option(
        "--size-weights",
        help="Relative share of each size in --numbers, e.g. 1,2,1 for 2..4 (default: "
        "uniform). A size whose solvable problems run out is dropped from the rest of "
        "the data, so the test split keeps the mix.",
    ),
]
_MaxNumber = Annotated[
    int | None,
    typer.Option(
        "--max-number", help=f"Numbers are drawn from 1..M (default {DEFAULTS['max_number']})."
    ),
]
_Targets = Annotated[
    str | None,
    typer.Option(
        "--targets", help=f"Target range LO..HI (default {_fmt(DEFAULTS['target_range'])})."
    ),
]
_Seed = Annotated[int | None, typer.Option("--seed", help="Random seed (default 0).")]
_TestSize = Annotated[int | None, typer.Option("--test-size", help="Rows in the test split.")]
_TestFraction = Annotated[
    float | None,
    typer.Option(
        "--test-fraction",
        help=f"Share of rows in the test split (default {DEFAULTS['test_fraction']}).",
    ),
]
_From = Annotated[
    Path | None,
    typer.Option(
        "--from",
        help="Convert this TinyZero/verl parquet or {target, nums} parquet/json/jsonl file "
        "instead of generating.",
    ),
]
_Solve = Annotated[
    bool,
    typer.Option(
        "--solve/--no-solve",
        help="With --from: attach reference solutions and drop unsolvable rows.",
    ),
]
_PromptStyle = Annotated[
    str,
    typer.Option("--prompt-style", help="'tinyzero' (system prompt + TinyZero's question), "
                 "'short' (a compact question for small models) or 'compact' (just the "
                 "numbers and the target, for a tiny model trained from scratch)."),
]


@app.command()
def countdown(
    out: _Out,
    n: _N = None,
    numbers: _Numbers = None,
    size_weights: _SizeWeights = None,
    max_number: _MaxNumber = None,
    targets: _Targets = None,
    seed: _Seed = None,
    test_size: _TestSize = None,
    test_fraction: _TestFraction = None,
    from_path: _From = None,
    solve: _Solve = True,
    prompt_style: _PromptStyle = COUNTDOWN.prompt_styles[0],
    overwrite: _Overwrite = False,
) -> None:
    """Generate Countdown instances (each proven solvable), or convert an existing file."""
    from calibrl.tasks.files import write_splits
    from calibrl.utils.files import check_output_dir, refuse_to_replace

    check_output_dir(out, "--out")
    refuse_to_replace(out, ("train.parquet", "test.parquet"), overwrite=overwrite)
    if prompt_style not in COUNTDOWN.prompt_styles:
        raise UserError(f"unknown --prompt-style {prompt_style!r}; choose "
                        f"{', '.join(COUNTDOWN.prompt_styles)}")
    generation = {"--numbers": numbers, "--size-weights": size_weights,
                  "--max-number": max_number, "--targets": targets, "--seed": seed}
    if from_path is not None:
        given = [name for name, value in generation.items() if value is not None]
        if given:
            raise UserError(f"{', '.join(given)} only apply when generating, not with --from")
        train, test = _convert(from_path, n, test_size, test_fraction, solve)
    else:
        if n is None:
            raise UserError("--n is required unless --from is given")
        options = _generation_options(numbers, size_weights, targets, max_number, seed)
        train, test = COUNTDOWN.generate(
            n, test_size=test_size, test_fraction=test_fraction, style=prompt_style, **options
        )
    paths = write_splits(out, {"train": train, "test": test})
    typer.echo(f"wrote {paths['train']} ({len(train)} rows) and {paths['test']} "
               f"({len(test)} rows)")


def _convert(from_path: Path, n: int | None, test_size: int | None,
             test_fraction: float | None, solve: bool) -> tuple[list, list]:
    """`--from`: the file's rows as train and test examples (deduplicated, optionally solved)."""
    result = COUNTDOWN.convert_file(
        from_path, n=n, test_size=test_size, test_fraction=test_fraction, solve=solve
    )
    typer.echo(
        f"read {result.rows_read} rows from {from_path}; dropped {result.duplicates} "
        f"duplicates and {result.unsolvable} unsolvable"
    )
    return result.train, result.test


# Conversion-only tasks, in their own module so this one stays Countdown's.
app.command("short-answer")(short_answer)
app.command("multiple-choice")(multiple_choice)
app.command("math")(math_problems)
