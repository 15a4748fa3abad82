"""`run_sft`: an SFT run in its folder, from data and model to `OUT/model` and the summary.

The folder follows the rules of `train` (`run_setup`): it is locked to one process; a folder that
holds an SFT run is continued with `resume` (from its newest intact checkpoint) or replaced with
`overwrite`, whose new run is written beside it and swapped in when done, so a kill leaves the
old run whole. Files in OUT that are not the run's (the demo keeps its initial model there) are
carried over into the replacing run.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import torch

from calibrl.data.example import TaskExample
from calibrl.errors import UserError, no_rows
from calibrl.models.loading import load_policy
from calibrl.settings.sft import SFTSettings
from calibrl.training.run_setup import closing_run, open_checkpointed_run
from calibrl.training.sft import (
    CONFIG_FILE,
    LOG_FILE,
    MODEL_DIR,
    SUMMARY_FILE,
    SFTResult,
    train_sft,
)
from calibrl.training.sft_data import exclude_problems
from calibrl.utils.atomic import atomic_write_text
from calibrl.utils.files import require_file

RUN_FILES = (CONFIG_FILE, LOG_FILE, SUMMARY_FILE, MODEL_DIR)  # besides checkpoint-*


def _not_the_runs(name: str) -> bool:
    return name not in RUN_FILES and not name.startswith("checkpoint-")


def load_model(spec: str, seed: int):
    """(model, tokenizer): a fresh tiny model for 'tiny', else `from_pretrained(spec)`."""
    if spec == "tiny":
        from calibrl.models import build_tiny_model, build_tokenizer

        tokenizer = build_tokenizer()
        return build_tiny_model(tokenizer, seed=seed), tokenizer
    path = Path(spec)
    if not path.is_dir():
        raise UserError(f"model {spec!r} is neither 'tiny' nor a model folder")
    model, tokenizer = load_policy(str(path), dtype="float32")
    if getattr(tokenizer, "chat_template", None) is None:
        raise UserError(f"the tokenizer in {path} has no chat template")
    return model, tokenizer


def load_problems(config: SFTSettings) -> tuple[list[TaskExample], list[TaskExample], int]:
    """(training problems without held-out ones, held-out problems, number excluded)."""
    from calibrl.tasks.files import load_examples

    for path in (config.data, *config.exclude):
        require_file(path)
    train = load_examples(config.data)
    if not train:
        raise no_rows(config.data)
    held_out = [ex for path in config.exclude for ex in load_examples(path)]
    kept, excluded = exclude_problems(train, held_out)
    if not kept:
        raise UserError(f"no training problem left in {config.data} after exclusion")
    if not any(ex.extra.get("solution") for ex in kept):
        raise UserError(f"{config.data} has no reference solutions (extra_info.solution); "
                        "generate it with `calibrl data countdown`")
    return kept, held_out, excluded


def run_sft(config: SFTSettings) -> tuple[SFTResult, dict]:
    """Load data and model, train (or continue), save `OUT/model`; returns the result and the
    run summary."""
    problems, held_out, excluded = load_problems(config)
    # accelerate's launcher numbers the processes; only the first locks and cleans the folder.
    main = int(os.environ.get("RANK", "0")) == 0
    run, ckpt = open_checkpointed_run(
        Path(config.out), resume="auto" if config.resume else None, overwrite=config.overwrite,
        markers=RUN_FILES, main=main, keep=_not_the_runs)
    with closing_run(run, main=main):
        if config.threads is not None:
            torch.set_num_threads(config.threads)
        model, tokenizer = load_model(config.model, config.seed)
        work = run.work
        work.mkdir(parents=True, exist_ok=True)
        atomic_write_text(work / CONFIG_FILE, config.model_dump_json(indent=2) + "\n")
        result = train_sft(model, tokenizer, problems, config, work, save_to=work / MODEL_DIR,
                           resume_from=ckpt)
        result = SFTResult(**{**asdict(result), "model_dir": str(run.final / MODEL_DIR)})
        summary = {**asdict(result), "problems": len(problems), "excluded_held_out": excluded,
                   "held_out": len(held_out)}
        atomic_write_text(work / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
        run.commit()
    return result, summary
