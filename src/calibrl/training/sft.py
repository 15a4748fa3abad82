"""`calibrl sft`: the supervised warm-up that teaches a model the answer and confidence formats.

One SFT model serves every RL mode: it learns the turn-1 trace (rlvr, two_turn), the turn-2
analysis + confidence reply (two_turn) and the single-turn RLCR completion (rlcr); see
`sft_data` for the conversations and why their confidences carry no information about
correctness, `sft_batch` for tokenisation, labels and batching.

The loop is plain PyTorch on one device: AdamW, warm-up then cosine (or constant) learning rate,
optional bf16 autocast (fast on CPUs with AMX/AVX512-BF16 and on GPUs), gradient clipping, and a
budget of steps and/or minutes, whichever ends first. Every `log_every` steps a JSON line goes to
`OUT/sft_log.jsonl`; at the end the model and tokenizer are saved to `OUT/model` atomically.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from calibrl.data.example import TaskExample
from calibrl.errors import UserError
from calibrl.models.loading import load_policy
from calibrl.training.sft_batch import (
    IGNORE,
    bucket_batches,
    collate,
    token_mean_loss,
    tokenize_conversation,
)
from calibrl.training.sft_config import SFTConfig
from calibrl.training.sft_data import build_conversations, exclude_problems
from calibrl.utils.atomic import atomic_dir

LOG_FILE = "sft_log.jsonl"
CONFIG_FILE = "sft_config.json"
SUMMARY_FILE = "summary.json"
MODEL_DIR = "model"
FINAL_LOSS_WINDOW = 50  # steps averaged (token-weighted) into the reported final loss


@dataclass(frozen=True)
class SFTResult:
    """What a run did; also written to `OUT/summary.json`."""

    steps: int
    epochs_started: int
    seconds: float
    tokens: int  # non-padding tokens seen (prompt + target)
    trained_tokens: int  # tokens with a loss
    tokens_per_s: float
    final_loss: float  # token-weighted mean of the last FINAL_LOSS_WINDOW steps
    conversations_dropped_long: int  # longer than max_seq_len, summed over epochs
    model_dir: str | None


def lr_factor(step: int, progress: float, *, warmup_steps: int, scheduler: str,
              min_lr_ratio: float) -> float:
    """Multiplier of the peak lr at optimiser step `step` (0-based) and progress in [0, 1].

    Linear warm-up over `warmup_steps` steps, times 1 (constant) or a cosine from 1 down to
    `min_lr_ratio` as progress goes 0 -> 1. Progress is time-based under a minutes budget, which
    a step-indexed transformers schedule cannot express.
    """
    warm = min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
    if scheduler == "constant_with_warmup":
        return warm
    p = min(max(progress, 0.0), 1.0)
    return warm * (min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * p)))


def resolve_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device cuda requested but torch sees no GPU")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def save_model_atomically(model, tokenizer, dest: Path) -> Path:
    """`save_pretrained` model + tokenizer into a temp folder beside `dest`, then swap it in."""
    with atomic_dir(Path(dest)) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(dest)


def _epoch_rows(problems, config: SFTConfig, tokenizer, epoch: int):
    # Each epoch draws new kinds, confidences and wrong traces for the same problems.
    rng = random.Random(f"sft-data-{config.seed}-{epoch}")
    conversations = build_conversations(problems, config.mix, rng,
                                        question=config.confidence_question)
    rows = [tokenize_conversation(tokenizer, c.messages) for c in conversations]
    kept = [r for r in rows if len(r.input_ids) <= config.max_seq_len]
    batches = bucket_batches([len(r.input_ids) for r in kept], config.batch_tokens, rng)
    return kept, batches, len(rows) - len(kept)


def _train_step(model, optimizer, batch: dict[str, torch.Tensor], config: SFTConfig,
                device: torch.device) -> tuple[float, float]:
    """One optimiser step on `batch` (tensors [B, T]); returns (loss, pre-clip grad norm)."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.bf16):
        logits = model(input_ids=batch["input_ids"],
                       attention_mask=batch["attention_mask"]).logits  # [B, T, V]
    loss = token_mean_loss(logits, batch["labels"])  # fp32 whatever the autocast dtype
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach()), float(grad_norm)


def train_sft(model, tokenizer, problems: Sequence[TaskExample], config: SFTConfig,
              out_dir: Path) -> SFTResult:
    """Train `model` in place on conversations built from `problems`; log to `out_dir`.

    Does not save the model (see `save_model_atomically`). Deterministic for a given seed when
    only `steps` bounds the run (a minutes budget makes the schedule depend on speed).
    """
    device = resolve_device(config.device)
    torch.manual_seed(config.seed)
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=config.betas,
                                  weight_decay=config.weight_decay)
    pad_id = tokenizer.pad_token_id
    pad_id = tokenizer.eos_token_id if pad_id is None else pad_id  # masked out either way
    budget_s = config.minutes * 60.0 if config.minutes is not None else None
    out_dir.mkdir(parents=True, exist_ok=True)
    log = (out_dir / LOG_FILE).open("w", encoding="utf-8")
    bar = tqdm(total=1000, disable=not config.progress, unit="‰", dynamic_ncols=True,
               bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")
    recent: deque[tuple[float, int]] = deque(maxlen=FINAL_LOSS_WINDOW)
    step = epoch = tokens = trained = dropped = 0
    interval_loss, interval_n = 0.0, 0
    start = time.perf_counter()

    def progress() -> float:
        done = step / config.steps if config.steps else 0.0
        if budget_s is not None:
            done = max(done, (time.perf_counter() - start) / budget_s)
        return done

    try:
        while progress() < 1.0:
            rows, batches, epoch_dropped = _epoch_rows(problems, config, tokenizer, epoch)
            dropped += epoch_dropped
            epoch += 1
            if not batches:
                raise UserError(f"no SFT conversation fits max_seq_len {config.max_seq_len}")
            for batch_index in batches:
                factor = lr_factor(step, progress(), warmup_steps=config.warmup_steps,
                                   scheduler=config.scheduler, min_lr_ratio=config.min_lr_ratio)
                for group in optimizer.param_groups:
                    group["lr"] = config.lr * factor
                batch = {k: v.to(device) for k, v in
                         collate([rows[i] for i in batch_index], pad_id).items()}
                value, grad_norm = _train_step(model, optimizer, batch, config, device)
                step += 1
                n_trained = int((batch["labels"][:, 1:] != IGNORE).sum())
                tokens += int(batch["attention_mask"].sum())
                trained += n_trained
                recent.append((value, n_trained))
                interval_loss += value * n_trained
                interval_n += n_trained
                elapsed = time.perf_counter() - start
                if step % config.log_every == 0:
                    row = {"step": step, "epoch": epoch, "loss": interval_loss / max(interval_n, 1),
                           "lr": config.lr * factor, "grad_norm": grad_norm,
                           "tokens": tokens, "trained_tokens": trained,
                           "tokens_per_s": tokens / elapsed, "elapsed_s": elapsed}
                    log.write(json.dumps(row) + "\n")
                    log.flush()
                    interval_loss, interval_n = 0.0, 0
                bar.n = min(1000, int(1000 * progress()))
                bar.set_postfix_str(f"step {step} loss {value:.3f} {tokens / elapsed:,.0f} tok/s",
                                    refresh=False)
                bar.refresh()
                if progress() >= 1.0:
                    break
    finally:
        bar.close()
        log.close()
    seconds = time.perf_counter() - start
    weight = sum(n for _, n in recent)
    final = sum(v * n for v, n in recent) / weight if weight else float("nan")
    return SFTResult(step, epoch, seconds, tokens, trained, tokens / seconds, final, dropped, None)


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


def load_problems(config: SFTConfig) -> tuple[list[TaskExample], list[TaskExample], int]:
    """(training problems without held-out ones, held-out problems, number excluded)."""
    from calibrl.data import load_examples

    for path in (config.data, *config.exclude):
        if not Path(path).is_file():
            raise UserError(f"no such file: {path}")
    train = load_examples(config.data)
    held_out = [ex for path in config.exclude for ex in load_examples(path)]
    kept, excluded = exclude_problems(train, held_out)
    if not kept:
        raise UserError(f"no training problem left in {config.data} after exclusion")
    if not any(ex.extra.get("solution") for ex in kept):
        raise UserError(f"{config.data} has no reference solutions (extra_info.solution); "
                        "generate it with `calibrl data countdown`")
    return kept, held_out, excluded


def run_sft(config: SFTConfig) -> tuple[SFTResult, dict]:
    """Load data and model, train, save `OUT/model`; returns the result and the run summary."""
    out = Path(config.out)
    problems, held_out, excluded = load_problems(config)
    if (out / MODEL_DIR).exists() and not config.overwrite:
        raise UserError(f"{out / MODEL_DIR} exists (pass overwrite to replace it)")
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    model, tokenizer = load_model(config.model, config.seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).write_text(config.model_dump_json(indent=2) + "\n")
    result = train_sft(model, tokenizer, problems, config, out)
    model_dir = save_model_atomically(model, tokenizer, out / MODEL_DIR)
    result = SFTResult(**{**asdict(result), "model_dir": str(model_dir)})
    summary = {**asdict(result), "problems": len(problems), "excluded_held_out": excluded,
               "held_out": len(held_out)}
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return result, summary
