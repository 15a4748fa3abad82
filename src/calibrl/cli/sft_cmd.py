"""`calibrl sft`: supervised warm-up on reference traces, in the formats of every RL mode."""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.cli.options import (
    OptionMap,
    config_option,
    print_config_option,
)
from calibrl.errors import UserError
from calibrl.settings.sft import SFTMix, SFTSettings, parse_mix

SFT = OptionMap(SFTSettings, convert={"mix": parse_mix}, extra=frozenset({"check"}),
                example="steps=300 lr=1e-3")


def _check_args(check: int, exclude: tuple[str, ...]) -> None:
    if check < 0:
        raise UserError(f"--check must be at least 0, got {check}")
    if check and not exclude:
        raise UserError("--check needs held-out problems: pass --exclude TEST.parquet")


def sft(
    ctx: typer.Context,
    overrides: list[str] = SFT.overrides_argument(),
    config: Path = config_option(),
    print_config: bool = print_config_option(),
    data: Path = SFT.option("data", "--data"),
    out: Path = SFT.option("out", "--out"),
    exclude: list[Path] = SFT.option("exclude", "--exclude", shown=[], more_help=" Repeatable."),
    model: str = SFT.option("model", "--model"),
    minutes: float = SFT.option("minutes", "--minutes"),
    steps: int = SFT.option("steps", "--steps"),
    lr: float = SFT.option("lr", "--lr"),
    batch_tokens: int = SFT.option("batch_tokens", "--batch-tokens"),
    warmup_steps: int = SFT.option("warmup_steps", "--warmup-steps"),
    scheduler: str = SFT.option("scheduler", "--scheduler"),
    mix: str = SFT.option("mix", "--mix", shown=SFTMix().text()),
    confidence_question: str = SFT.option("confidence_question", "--confidence-question"),
    bf16: bool = SFT.option("bf16", "--bf16/--no-bf16"),
    device: str = SFT.option("device", "--device"),
    threads: int = SFT.option("threads", "--threads"),
    seed: int = SFT.option("seed", "--seed"),
    overwrite: bool = SFT.option("overwrite", "--overwrite"),
    resume: bool = SFT.option("resume", "--resume"),
    checkpoint_every: int = SFT.option("checkpoint_every", "--checkpoint-every"),
    check: int = typer.Option(0, "--check", help="After training, generate greedily for the "
                              "first N held-out (--exclude) problems and print format rates and "
                              "accuracy."),
) -> None:
    """Teach a model the answer and confidence formats before RL; saves OUT/model."""
    settings = SFT.load(ctx)
    _check_args(check, settings.exclude)
    # Imported here so `calibrl --help` does not pay for torch and transformers.
    from calibrl.training.sft_run import run_sft

    result, summary = run_sft(settings)
    typer.echo(
        f"trained {result.steps} steps in {result.seconds:.0f} s ({result.tokens_per_s:,.0f} "
        f"tokens/s) on {summary['problems']} problems ({summary['excluded_held_out']} held-out "
        f"ones excluded); final loss {result.final_loss:.4f}; saved {result.model_dir}"
    )
    if check:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from calibrl.tasks.files import load_examples
        from calibrl.training.sft_check import check_model

        held_out = [ex for path in settings.exclude for ex in load_examples(path)][:check]
        loaded = AutoModelForCausalLM.from_pretrained(result.model_dir)
        tokenizer = AutoTokenizer.from_pretrained(result.model_dir)
        for line in check_model(loaded, tokenizer, held_out, seed=settings.seed).lines():
            typer.echo(line)
