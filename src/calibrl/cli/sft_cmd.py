"""`calibrl sft`: supervised warm-up on reference traces, in the formats of every RL mode."""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.errors import UserError
from calibrl.training.sft_config import SFTConfig
from calibrl.training.sft_data import parse_mix


def _help(name: str) -> str:
    field = SFTConfig.model_fields[name]
    if field.is_required() or field.get_default() in (None, ()):
        return field.description
    return f"{field.description} (default: {field.get_default()})"


def _check_args(minutes: float | None, steps: int | None, check: int, exclude: list[Path]
                ) -> None:
    if minutes is None and steps is None:
        raise UserError("give --minutes and/or --steps")
    if check < 0:
        raise UserError(f"--check must be at least 0, got {check}")
    if check and not exclude:
        raise UserError("--check needs held-out problems: pass --exclude TEST.parquet")


def sft(
    data: Path = typer.Option(..., "--data", help=_help("data")),
    out: Path = typer.Option(..., "--out", help=_help("out")),
    exclude: list[Path] = typer.Option([], "--exclude", help=_help("exclude") + " Repeatable."),
    model: str | None = typer.Option(None, "--model", help=_help("model")),
    minutes: float | None = typer.Option(None, "--minutes", help=_help("minutes")),
    steps: int | None = typer.Option(None, "--steps", help=_help("steps")),
    lr: float | None = typer.Option(None, "--lr", help=_help("lr")),
    batch_tokens: int | None = typer.Option(None, "--batch-tokens", help=_help("batch_tokens")),
    warmup_steps: int | None = typer.Option(None, "--warmup-steps", help=_help("warmup_steps")),
    scheduler: str | None = typer.Option(None, "--scheduler", help=_help("scheduler")),
    mix: str | None = typer.Option(
        None, "--mix", help="Shares as NAME=VALUE,...: answer, confidence, rlcr (kinds) and "
        "wrong_share (wrong turn-2 contexts) (default: answer=0.5,confidence=0.25,rlcr=0.25,"
        "wrong_share=0.5)"),
    confidence_question: str | None = typer.Option(None, "--confidence-question",
                                                   help=_help("confidence_question")),
    bf16: bool | None = typer.Option(None, "--bf16/--no-bf16", help=_help("bf16")),
    device: str | None = typer.Option(None, "--device", help=_help("device")),
    threads: int | None = typer.Option(None, "--threads", help=_help("threads")),
    seed: int | None = typer.Option(None, "--seed", help=_help("seed")),
    overwrite: bool = typer.Option(False, "--overwrite", help=_help("overwrite")),
    resume: bool = typer.Option(False, "--resume", help=_help("resume")),
    checkpoint_every: int | None = typer.Option(None, "--checkpoint-every",
                                                help=_help("checkpoint_every")),
    check: int = typer.Option(0, "--check", help="After training, generate greedily for the "
                              "first N held-out (--exclude) problems and print format rates and "
                              "accuracy."),
) -> None:
    """Teach a model the answer and confidence formats before RL; saves OUT/model."""
    _check_args(minutes, steps, check, exclude)
    given = {
        "model": model, "minutes": minutes, "steps": steps, "lr": lr, "batch_tokens": batch_tokens,
        "warmup_steps": warmup_steps, "scheduler": scheduler, "bf16": bf16, "device": device,
        "threads": threads, "seed": seed, "mix": parse_mix(mix) if mix is not None else None,
        "confidence_question": confidence_question, "checkpoint_every": checkpoint_every,
    }
    config = SFTConfig.create(
        data=str(data), out=str(out), exclude=tuple(str(p) for p in exclude), overwrite=overwrite,
        resume=resume,
        **{k: v for k, v in given.items() if v is not None},
    )
    # Imported here so `calibrl --help` does not pay for torch and transformers.
    from calibrl.training.sft_run import run_sft

    result, summary = run_sft(config)
    typer.echo(
        f"trained {result.steps} steps in {result.seconds:.0f} s ({result.tokens_per_s:,.0f} "
        f"tokens/s) on {summary['problems']} problems ({summary['excluded_held_out']} held-out "
        f"ones excluded); final loss {result.final_loss:.4f}; saved {result.model_dir}"
    )
    if check:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from calibrl.data import load_examples
        from calibrl.training.sft_check import check_model

        held_out = [ex for path in exclude for ex in load_examples(path)][:check]
        loaded = AutoModelForCausalLM.from_pretrained(result.model_dir)
        tokenizer = AutoTokenizer.from_pretrained(result.model_dir)
        for line in check_model(loaded, tokenizer, held_out, seed=config.seed).lines():
            typer.echo(line)
