"""`calibrl data numeric-qa`: word problems generated, or `{question, answer}` rows converted,
as DIR/train.parquet and DIR/test.parquet (added to the `calibrl data` group in `cli.main`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from calibrl.cli.data_cmd import parse_range
from calibrl.errors import UserError
from calibrl.tasks import get_task

NUMERIC_QA = get_task("numeric_qa")
DEFAULTS = NUMERIC_QA.generate_options

_Out = Annotated[Path, typer.Option("--out", help="Folder for train.parquet and test.parquet.")]
_Overwrite = Annotated[bool, typer.Option(
    "--overwrite", help="Replace the splits already in --out.")]
_N = Annotated[
    int | None, typer.Option("--n", help="Rows over both splits; with --from, at most this many.")
]
_NumSteps = Annotated[str | None, typer.Option(
    "--num-steps", help="Steps (events) per word problem, LO..HI; the difficulty groups "
    "(default {}..{}).".format(*DEFAULTS["num_steps"]))]
_MaxOperand = Annotated[int | None, typer.Option(
    "--max-operand", help=f"Counts added or taken away are 1..M (default "
    f"{DEFAULTS['max_operand']}).")]
_Seed = Annotated[int | None, typer.Option("--seed", help="Random seed (default 0).")]
_TestSize = Annotated[int | None, typer.Option("--test-size", help="Rows in the test split.")]
_TestFraction = Annotated[float | None, typer.Option(
    "--test-fraction", help=f"Share of rows in the test split (default "
    f"{DEFAULTS['test_fraction']}).")]
_From = Annotated[Path | None, typer.Option(
    "--from", help="Convert this file (.parquet, .json, .jsonl) or folder saved by datasets "
    "(save_to_disk; one split's folder) with columns question and answer (a number, or a "
    "GSM8K solution ending in '#### N') instead of generating.")]
_PromptStyle = Annotated[str, typer.Option(
    "--prompt-style", help="'instruct' (the question and how to answer it, for pretrained "
    "models) or 'compact' (the question alone, for a tiny model trained from scratch).")]


def numeric_qa(
    out: _Out, n: _N = None, num_steps: _NumSteps = None, max_operand: _MaxOperand = None,
    seed: _Seed = None, test_size: _TestSize = None, test_fraction: _TestFraction = None,
    from_path: _From = None, prompt_style: _PromptStyle = NUMERIC_QA.prompt_styles[0],
    overwrite: _Overwrite = False,
) -> None:
    """Generate arithmetic word problems (difficulty: steps), or convert question/answer rows."""
    from calibrl.tasks.files import write_splits
    from calibrl.utils.files import refuse_to_replace

    refuse_to_replace(out, ("train.parquet", "test.parquet"), overwrite=overwrite)

    if prompt_style not in NUMERIC_QA.prompt_styles:
        raise UserError(f"unknown --prompt-style {prompt_style!r}; choose "
                        f"{', '.join(NUMERIC_QA.prompt_styles)}")
    task = dataclasses.replace(NUMERIC_QA, prompt_style=prompt_style)
    generation = {"--num-steps": num_steps, "--max-operand": max_operand, "--seed": seed}
    if from_path is not None:
        given = [name for name, value in generation.items() if value is not None]
        if given:
            raise UserError(f"{', '.join(given)} only apply when generating, not with --from")
        result = task.convert_file(from_path, n=n, test_size=test_size,
                                   test_fraction=test_fraction)
        typer.echo(f"read {result.rows_read} rows from {from_path}; dropped "
                   f"{result.duplicates} repeated questions")
        train, test = result.train, result.test
    else:
        if n is None:
            raise UserError("--n is required unless --from is given")
        options = {"num_steps": parse_range(num_steps, "--num-steps") if num_steps else None,
                   "max_operand": max_operand, "seed": seed}
        train, test = task.generate(n, test_size=test_size, test_fraction=test_fraction,
                                    **{k: v for k, v in options.items() if v is not None})
    paths = write_splits(out, {"train": train, "test": test})  # swapped in together
    typer.echo(f"wrote {paths['train']} ({len(train)} rows) and {paths['test']} "
               f"({len(test)} rows)")
