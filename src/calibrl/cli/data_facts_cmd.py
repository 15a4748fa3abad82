"""`calibrl data world-facts`: questions of real knowledge (capitals, continents, currencies,
cities' countries, US state capitals, element symbols) from public data packages, split by
entity, as DIR/train.parquet and DIR/test.parquet, and DIR/held_out.parquet for held-out types
(added to the `calibrl data` group in `cli.main`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from calibrl.errors import UserError
from calibrl.tasks import get_task
from calibrl.tasks.short_answer.world_types import (
    DEFAULT_CITIES_PER_COUNTRY,
    DEFAULT_MIN_CITY_POPULATION,
    DEFAULT_TEST_FRACTION,
    FACT_TYPES,
)

SHORT_ANSWER = get_task("short_answer")

_Out = Annotated[Path, typer.Option(
    "--out", help="Folder for train.parquet, test.parquet (and held_out.parquet).")]
_Seed = Annotated[int, typer.Option("--seed", help="Seed of the split and the rows' order.")]
_Overwrite = Annotated[bool, typer.Option(
    "--overwrite", help="Replace the splits already in --out.")]
_TestFraction = Annotated[float, typer.Option(
    "--test-fraction", help="Share of the questions (of the types not held out) in the test "
    "split, at most: entities linked by a question stay on one side.")]
_Types = Annotated[str | None, typer.Option(
    "--types", help=f"Comma-separated fact types (default all): {', '.join(FACT_TYPES)}.")]
_HoldOut = Annotated[str | None, typer.Option(
    "--hold-out-type", help="Comma-separated fact types kept out of train and test: every "
    "question of them goes to held_out.parquet.")]
_MinCity = Annotated[int, typer.Option(
    "--min-city-population", help="Cities asked about have at least this many people.")]
_PerCountry = Annotated[int, typer.Option(
    "--cities-per-country", help="At most this many cities of one country (its most "
    "populous).")]
_PromptStyle = Annotated[str, typer.Option(
    "--prompt-style", help="'instruct' (the question and how to answer it, for pretrained "
    "models) or 'compact' (without the instruction, for a tiny model trained from scratch).")]


def _names(text: str | None, option: str) -> list[str] | None:
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise UserError(f"{option} expects comma-separated fact types, got {text!r}")
    return names


def world_facts(
    out: _Out, seed: _Seed = 0, test_fraction: _TestFraction = DEFAULT_TEST_FRACTION,
    types: _Types = None, hold_out_type: _HoldOut = None,
    min_city_population: _MinCity = DEFAULT_MIN_CITY_POPULATION,
    cities_per_country: _PerCountry = DEFAULT_CITIES_PER_COUNTRY,
    prompt_style: _PromptStyle = SHORT_ANSWER.prompt_styles[0],
    overwrite: _Overwrite = False,
) -> None:
    """Make short-answer questions of real knowledge from data packages (pip install
    'calibrl[facts]'), split so that no test entity is in a training question."""
    from calibrl.tasks.files import write_splits
    from calibrl.tasks.short_answer.world_split import HELD_OUT, world_splits
    from calibrl.tasks.short_answer.world_types import parse_types
    from calibrl.utils.files import check_output_dir, refuse_to_replace

    check_output_dir(out, "--out")
    refuse_to_replace(out, [f"{name}.parquet" for name in ("train", "test", HELD_OUT)],
                      overwrite=overwrite)
    if prompt_style not in SHORT_ANSWER.prompt_styles:
        raise UserError(f"unknown --prompt-style {prompt_style!r}; choose "
                        f"{', '.join(SHORT_ANSWER.prompt_styles)}")
    chosen = parse_types(_names(types, "--types"))
    held = parse_types(_names(hold_out_type, "--hold-out-type")) if hold_out_type else ()
    if set(held) - set(chosen):
        raise UserError(f"--hold-out-type {', '.join(sorted(set(held) - set(chosen)))} is not "
                        "among --types")
    for value, option in ((min_city_population, "--min-city-population"),
                          (cities_per_country, "--cities-per-country")):
        if value < 0:
            raise UserError(f"{option} must be at least 0, got {value}")
    splits, table = world_splits(chosen, held, seed=seed, test_fraction=test_fraction,
                                 style=prompt_style, min_city_population=min_city_population,
                                 cities_per_country=cities_per_country)
    paths = write_splits(out, splits)
    typer.echo(table)
    typer.echo("wrote " + ", ".join(f"{paths[name]} ({len(rows)} rows)"
                                    for name, rows in splits.items()))
    stale = out / f"{HELD_OUT}.parquet"
    if HELD_OUT not in splits and stale.exists():  # an earlier run's held-out type, not this one's
        stale.unlink()
        typer.echo(f"removed {stale} (an earlier run's held-out questions)")
