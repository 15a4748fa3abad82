"""`calibrl sft`: the supervised warm-up that teaches a model the answer and confidence formats.

One SFT model serves every RL mode: it learns the turn-1 trace (rlvr, two_turn), the turn-2
analysis + confidence reply (two_turn) and the single-turn RLCR completion (rlcr); see
`sft_data` for the conversations and why their confidences carry no information about
correctness, `sft_batch` for tokenisation, labels and batching.

The loop runs on accelerate like the RL trainer: the `Accelerator` places the model and batches
on the device and applies mixed precision ("bf16" autocast when `bf16`, fast on CPUs with
AMX/AVX512-BF16 and on GPUs; weights and optimiser stay fp32), `accelerator.backward` and
`accelerator.clip_grad_norm_` do the step, and the saved model is the unwrapped one. AdamW,
warm-up then cosine (or constant) learning rate, and a budget of steps and/or minutes, whichever
ends first. Every `log_every` steps a JSON line goes to `OUT/sft_log.jsonl`; at the end the
model and tokenizer are saved to `OUT/model` atomically. Every process trains on the same
batches: it is a one-device loop (on CPU in fp32 it computes exactly what plain PyTorch did).

Every `checkpoint_every` steps and at the end, `OUT/checkpoint-NNNNNN` holds the weights, the
optimiser, the counters, the position in the epoch and the RNG states (the format and checksums of
`checkpoint`), so a resumed run takes the same steps as one never stopped. A non-finite loss,
gradient norm or weight stops the run (`UserError`) before it reaches the weights or a checkpoint.
A stop signal ends the run after the step in flight, checkpointed (`calibrl.training.preemption`).
The run folder itself (lock, resume, overwrite) is `sft_run`'s business.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from tqdm.auto import tqdm

from calibrl.data.example import TaskExample
from calibrl.errors import UserError
from calibrl.models.adapters import prepare_policy, trainable_parameters
from calibrl.settings.sft import SFTSettings
from calibrl.training.checkpoint import (
    Checkpoint,
    list_checkpoints,
    save_checkpoint,
    set_rng_state,
)
from calibrl.training.distributed import record_launch
from calibrl.training.metrics_log import truncate_log
from calibrl.training.preemption import StopRequests, checkpoint_step
from calibrl.training.sft_batch import (
    IGNORE,
    bucket_batches,
    collate,
    token_mean_loss,
    tokenize_conversation,
)
from calibrl.training.sft_data import build_conversations
from calibrl.utils.atomic import atomic_dir
from calibrl.utils.write_errors import naming_failed_writes

LOG_FILE = "sft_log.jsonl"
CONFIG_FILE = "sft_config.json"
SUMMARY_FILE = "summary.json"
MODEL_DIR = "model"
FINAL_LOSS_WINDOW = 50  # steps averaged (token-weighted) into the reported final loss
KEEP_CHECKPOINTS = 2  # the newest and one to fall back to if it is damaged


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


def make_accelerator(config: SFTSettings) -> Accelerator:
    """The run's accelerate `Accelerator`: mixed precision "bf16" when `config.bf16`, else "no";
    device 'cpu' forces the CPU, 'auto' takes a GPU when there is one."""
    if config.device == "cuda" and not torch.cuda.is_available():
        raise UserError("device cuda requested but torch sees no GPU")
    try:
        return Accelerator(mixed_precision="bf16" if config.bf16 else "no",
                           cpu=config.device == "cpu")
    except ValueError as err:
        # accelerate keeps one state per process, fixed by the first Accelerator: an SFT run
        # after an RL run (or another SFT run) in one process must use the same precision.
        raise UserError(f"sft: {err.args[0] if err.args else err}") from None


def save_model_atomically(model, tokenizer, dest: Path) -> Path:
    """`save_pretrained` model + tokenizer into a temp folder beside `dest`, then swap it in."""
    with atomic_dir(Path(dest)) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(dest)


def _epoch_rows(problems, config: SFTSettings, tokenizer, epoch: int):
    # Each epoch draws new kinds, confidences and wrong traces for the same problems.
    rng = random.Random(f"sft-data-{config.seed}-{epoch}")
    conversations = build_conversations(problems, config.mix, rng,
                                        grid=config.confidence_grid, question=config.confidence_question,
                                        analysis=config.analysis, reanswers=config.reanswers,
                                        failed_attempt_p=config.failed_attempt_p,
                                        max_failed_attempts=config.max_failed_attempts)
    rows = [tokenize_conversation(tokenizer, c.messages, c.reply_prefix) for c in conversations]
    kept = [r for r in rows if len(r.input_ids) <= config.max_seq_len]
    batches = bucket_batches([len(r.input_ids) for r in kept], config.batch_tokens, rng)
    return kept, batches, len(rows) - len(kept)


@dataclass
class _Tally:
    """Counters of a run: steps, tokens, the loss since the last log line and of recent steps."""

    config: SFTSettings
    start: float = field(default_factory=time.perf_counter)
    step: int = 0
    epoch: int = 0
    tokens: int = 0
    trained: int = 0
    dropped: int = 0
    interval_loss: float = 0.0
    interval_n: int = 0
    recent: deque = field(default_factory=lambda: deque(maxlen=FINAL_LOSS_WINDOW))

    def progress(self) -> float:
        """The larger of steps done / steps and time used / minutes (0 -> 1)."""
        done = self.step / self.config.steps if self.config.steps else 0.0
        if self.config.minutes is not None:
            done = max(done, self.elapsed() / (self.config.minutes * 60.0))
        return done

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def add(self, loss: float, batch: dict[str, torch.Tensor]) -> None:
        n_trained = int((batch["labels"][:, 1:] != IGNORE).sum())
        self.step += 1
        self.tokens += int(batch["attention_mask"].sum())
        self.trained += n_trained
        self.recent.append((loss, n_trained))
        self.interval_loss += loss * n_trained
        self.interval_n += n_trained

    def log_row(self, lr: float, grad_norm: float) -> dict:
        """The `sft_log.jsonl` line for the steps since the last one (token-weighted loss)."""
        elapsed = self.elapsed()
        row = {"step": self.step, "epoch": self.epoch,
               "loss": self.interval_loss / max(self.interval_n, 1), "lr": lr,
               "grad_norm": grad_norm, "tokens": self.tokens, "trained_tokens": self.trained,
               "tokens_per_s": self.tokens / elapsed, "elapsed_s": elapsed}
        self.interval_loss, self.interval_n = 0.0, 0
        return row

    def state_dict(self) -> dict[str, Any]:
        names = ("step", "epoch", "tokens", "trained", "dropped", "interval_loss", "interval_n")
        return {**{n: getattr(self, n) for n in names}, "recent": list(self.recent),
                "elapsed": self.elapsed()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            if name not in ("recent", "elapsed"):
                setattr(self, name, value)
        self.recent.extend(state["recent"])
        self.start = time.perf_counter() - state["elapsed"]  # a minutes budget counts both runs

    def result(self) -> SFTResult:
        seconds = self.elapsed()
        weight = sum(n for _, n in self.recent)
        final = sum(v * n for v, n in self.recent) / weight if weight else float("nan")
        return SFTResult(self.step, self.epoch, seconds, self.tokens, self.trained,
                         self.tokens / seconds, final, self.dropped, None)


def _backward(accelerator: Accelerator, model, batch: dict[str, torch.Tensor],
              config: SFTSettings) -> tuple[float, float]:
    """Gradients of the loss on `batch` (tensors [B, T]), clipped; returns (loss, pre-clip
    grad norm). The caller steps the optimiser once both are known to be finite."""
    with accelerator.autocast():
        logits = model(input_ids=batch["input_ids"],
                       attention_mask=batch["attention_mask"]).logits  # [B, T, V]
    loss = token_mean_loss(logits, batch["labels"])  # fp32 whatever the autocast dtype
    accelerator.backward(loss)
    grad_norm = accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
    return float(loss.detach()), float(grad_norm)


def _stop_if_non_finite(run: _Run, step: int, values: dict[str, float]) -> None:
    bad = [f"{name} ({value})" for name, value in values.items() if not math.isfinite(value)]
    if bad:
        last = list_checkpoints(run.out_dir)
        kept = f"the last good checkpoint is {last[-1].path}" if last else "no checkpoint yet"
        raise UserError(f"sft step {step}: non-finite {', '.join(bad)}; training stopped "
                        f"before the update, {kept}")


def _max_abs_weight(model) -> float:
    with torch.no_grad():
        return max(float(p.detach().abs().max()) for p in model.parameters())


def _progress_bar(config: SFTSettings, accelerator: Accelerator) -> tqdm:
    return tqdm(total=1000, disable=not (config.progress and accelerator.is_main_process),
                unit="‰", dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")


@dataclass
class _Run:
    """What the steps of a run share: the prepared model and optimiser, the log, the bar, the
    folder its checkpoints go to, and how many batches of the current epoch are done."""

    config: SFTSettings
    accelerator: Accelerator
    model: Any
    optimizer: Any
    tokenizer: Any
    log: Any
    bar: tqdm
    out_dir: Path
    stop: StopRequests = field(default_factory=StopRequests)  # installed by `train_sft`
    position: int = 0

    def save(self, tally: _Tally) -> None:
        _stop_if_non_finite(self, tally.step, {"weight": _max_abs_weight(self.model)})
        if self.accelerator.is_main_process:
            save_checkpoint(self.out_dir, tally.step, model=self.accelerator.unwrap_model(
                self.model), tokenizer=self.tokenizer, keep_last=KEEP_CHECKPOINTS,
                trainer_state={"optimizer": self.optimizer.state_dict(),
                               "tally": tally.state_dict(), "position": self.position})


def _run_epoch(run: _Run, tally: _Tally, rows, batches) -> None:
    """Steps over one epoch's batches, from `run.position` on, until the budget is spent."""
    config, pad_id = run.config, _pad_id(run.tokenizer)
    for batch_index in batches[run.position:]:
        factor = lr_factor(tally.step, tally.progress(), warmup_steps=config.warmup_steps,
                           scheduler=config.scheduler, min_lr_ratio=config.min_lr_ratio)
        for group in run.optimizer.param_groups:
            group["lr"] = config.lr * factor
        batch = {k: v.to(run.accelerator.device) for k, v in
                 collate([rows[i] for i in batch_index], pad_id).items()}
        value, grad_norm = _backward(run.accelerator, run.model, batch, config)
        _stop_if_non_finite(run, tally.step + 1, {"loss": value, "gradient norm": grad_norm})
        run.optimizer.step()
        run.optimizer.zero_grad(set_to_none=True)
        tally.add(value, batch)
        run.position += 1
        if tally.step % config.log_every == 0 and run.log is not None:
            with naming_failed_writes(run.out_dir / LOG_FILE):
                run.log.write(json.dumps(tally.log_row(config.lr * factor, grad_norm)) + "\n")
                run.log.flush()
        done = tally.progress() >= 1.0
        checkpoint_step(run.stop, run.accelerator, step=tally.step, last=done,
                        due=done or tally.step % config.checkpoint_every == 0,
                        save=lambda: run.save(tally))
        run.bar.n = min(1000, int(1000 * tally.progress()))
        run.bar.set_postfix_str(f"step {tally.step} loss {value:.3f} "
                                f"{tally.tokens / tally.elapsed():,.0f} tok/s", refresh=False)
        run.bar.refresh()
        if done:
            return


def _pad_id(tokenizer) -> int:
    pad_id = tokenizer.pad_token_id
    return tokenizer.eos_token_id if pad_id is None else pad_id  # masked out either way


def _resume(run: _Run, tally: _Tally, ckpt: Checkpoint) -> None:
    """Continue at `ckpt`: its weights, optimiser, counters, epoch position and RNG states."""
    from safetensors.torch import load_file

    weights = load_file(str(ckpt.model_dir / "model.safetensors"))
    run.accelerator.unwrap_model(run.model).load_state_dict(weights, strict=False)
    state = ckpt.load_state()
    run.optimizer.load_state_dict(state["optimizer"])
    tally.load_state_dict(state["tally"])
    run.position = state["position"]
    set_rng_state(state["rng"])


def train_sft(model, tokenizer, problems: Sequence[TaskExample], config: SFTSettings,
              out_dir: Path, *, save_to: Path | None = None,
              resume_from: Checkpoint | None = None) -> SFTResult:
    """Train `model` in place on conversations built from `problems`; log and checkpoint to
    `out_dir`; with `resume_from`, continue that checkpoint's run (its later log rows go).

    With `save_to`, the trained model (unwrapped from accelerate) and the tokenizer are saved
    there atomically (`save_model_atomically`) and the result names it. Deterministic for a
    given seed when only `steps` bounds the run (a minutes budget makes the schedule depend on
    speed), resumed or not.
    """
    accelerator = make_accelerator(config)
    torch.manual_seed(config.seed)
    prepare_policy(model, train_layers=config.train_layers)
    model.train()
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=config.lr, betas=config.betas,
                                  weight_decay=config.weight_decay)
    prepared, optimizer = accelerator.prepare(model, optimizer)
    out_dir.mkdir(parents=True, exist_ok=True)
    record_launch(accelerator, out_dir)
    log = None
    if accelerator.is_main_process:
        if resume_from is not None:
            truncate_log(out_dir / LOG_FILE, resume_from.step)
        log = (out_dir / LOG_FILE).open("a" if resume_from else "w", encoding="utf-8")
    run = _Run(config, accelerator, prepared, optimizer, tokenizer, log,
               _progress_bar(config, accelerator), out_dir)
    tally = _Tally(config)
    if resume_from is not None:
        _resume(run, tally, resume_from)
    try:
        run.stop = StopRequests(announce=accelerator.is_main_process)
        with run.stop:
            _run_epochs(run, tally, problems)
    finally:
        run.bar.close()
        if log is not None:
            with naming_failed_writes(out_dir / LOG_FILE):  # flushes what a full disk refused
                log.close()
    result = tally.result()
    # The caller's model without accelerate's wrappers (bf16 patches its forward with autocast).
    trained = accelerator.unwrap_model(prepared, keep_fp32_wrapper=False)
    if save_to is None:
        return result
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        save_model_atomically(trained, tokenizer, save_to)
    return SFTResult(**{**asdict(result), "model_dir": str(save_to)})


def _run_epochs(run: _Run, tally: _Tally, problems: Sequence[TaskExample]) -> None:
    """Epochs until the budget is spent; a resumed run first finishes its current epoch."""
    config = run.config
    while tally.progress() < 1.0:
        if run.position:  # resumed inside epoch `tally.epoch - 1`: same rows, counted already
            rows, batches, _ = _epoch_rows(problems, config, run.tokenizer, tally.epoch - 1)
        else:
            rows, batches, dropped = _epoch_rows(problems, config, run.tokenizer, tally.epoch)
            tally.dropped += dropped
            tally.epoch += 1
        if not batches:
            raise UserError(f"no SFT conversation fits max_seq_len {config.max_seq_len}")
        _run_epoch(run, tally, rows, batches)
        run.position = 0

