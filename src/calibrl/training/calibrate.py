"""`calibrl calibrate`: the confidence warm-up, between the answer warm-up (`calibrl sft`) and RL.

RL gives a confidence one reward per sampled value, which can shift the average stated value
but hardly builds a feature that tells this answer from another of the same difficulty; a
supervised target on every graded answer can (shared/notes measured within-difficulty AUROC
0.76-0.78 after this stage against 0.54 after RL alone). So: the model answers training
prompts, the task grades the answers (`calibrate_data`), and the model is tuned on its turn-2
replies with a proper scoring loss on the stated value (`algo.confidence_loss`), plus, with
small weights, cross-entropy on the rest of its own turn-2 text (the format stays parseable)
and on its own correct answers (accuracy stays).

Each step draws `batch_size` confidence rows and `answer_batch_size` answer rows (seeded):

    loss = mean_b score(p_b, target_b)
           + format_weight * (CE on the reply's other tokens + mean_b -log mass on value tokens)
           + answer_weight * CE on the answers

Writes `OUT/calibrate_config.json` (the settings, verbatim), `OUT/graded.jsonl` (every graded
answer with its target), `OUT/calibrate_log.jsonl`, `OUT/summary.json` and `OUT/model`, swapped
in together when done: a killed stage leaves the previous one whole; rerun it (it is minutes).
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from calibrl.algo.confidence_loss import CONFIDENCE_LOSSES, expected_value, value_mass_nll
from calibrl.algo.stated_value import ValueTokens, value_tokens
from calibrl.errors import UserError, already_holds, no_rows
from calibrl.models.adapters import decoder_blocks, prepare_policy, trainable_parameters
from calibrl.models.forward import logits_at, logits_from
from calibrl.models.frozen_blocks import (
    lower_states,
    matches_full_forward,
    padded,
    splittable,
    upper_logits,
)
from calibrl.settings.calibrate import CalibrateSettings
from calibrl.training.calibrate_data import (
    ConfidenceRow,
    GradedAnswer,
    answer_row,
    confidence_row,
    sample_graded,
)
from calibrl.training.sft import lr_factor, make_accelerator
from calibrl.training.sft_batch import (
    IGNORE,
    collate,
    token_mean_loss,
)
from calibrl.utils.atomic import atomic_dir
from calibrl.utils.files import check_output_dir, require_file

CONFIG_FILE = "calibrate_config.json"
GRADED_FILE = "graded.jsonl"
LOG_FILE = "calibrate_log.jsonl"
SUMMARY_FILE = "summary.json"
MODEL_DIR = "model"


def pad_id(tokenizer: Any) -> int:
    """The id padded rows end with (masked out either way)."""
    return tokenizer.eos_token_id if tokenizer.pad_token_id is None else tokenizer.pad_token_id


def confidence_batch(rows: list[ConfidenceRow], pad: int) -> dict[str, torch.Tensor]:
    """`collate`'s input_ids, attention_mask, labels [B, T]; value_pos, targets [B]."""
    return {**collate(rows, pad), "value_pos": torch.tensor([r.value_pos for r in rows]),
            "targets": torch.tensor([r.target for r in rows], dtype=torch.float32)}


def value_logits_at(logits: torch.Tensor, value_pos: torch.Tensor) -> torch.Tensor:
    """[B, V] logits that predict the token at `value_pos` ([B]) from logits [B, T, V]."""
    return logits[torch.arange(logits.shape[0]), value_pos - 1]


def first_read(labels: torch.Tensor, value_pos: torch.Tensor | None = None) -> int:
    """The first position whose logits a loss reads: the one before the batch's first labelled
    token (labels [B, T]) and before its first value (value_pos [B]); in 0..T-1."""
    labelled = labels != IGNORE  # [B, T]
    firsts = torch.where(labelled.any(1), labelled.int().argmax(1), labels.shape[1])  # [B]
    if value_pos is not None:
        firsts = torch.minimum(firsts, value_pos)
    return int(min(max(int(firsts.min()) - 1, 0), labels.shape[1] - 1))


def batch_logits(model: Any, batch: dict[str, torch.Tensor], start: int,
                 frozen: int | None = None) -> torch.Tensor:
    """[B, T - start, V] the logits at positions start..T-1 of a `collate` batch: from its
    token ids, or with `frozen` from its `states` ([B, T, H]) entering block `frozen`."""
    if frozen is None:
        return logits_from(model, batch["input_ids"], batch["attention_mask"], start)
    return upper_logits(model, batch["states"], batch["attention_mask"], frozen, start)


def confidence_terms(model: Any, batch: dict[str, torch.Tensor], values: ValueTokens,
                     loss_name: str, frozen: int | None = None) -> dict[str, torch.Tensor]:
    """The scoring loss, the format CE and the value tokens' missing mass (scalars), and the
    expected stated value per row ([B], detached) of one confidence batch. Only the reply's
    positions go through the output layer (the context's logits are never read)."""
    ids, vals = (t.to(batch["input_ids"].device) for t in values.tensors())
    start = first_read(batch["labels"], batch["value_pos"])
    logits = batch_logits(model, batch, start, frozen)  # [B, T - start, V]
    at_value = value_logits_at(logits, batch["value_pos"] - start)  # [B, V]
    score = CONFIDENCE_LOSSES[loss_name](at_value[:, ids], vals, batch["targets"])  # [B]
    return {"score": score.mean(),
            "format": token_mean_loss(logits, batch["labels"][:, start:]),
            "mass": value_mass_nll(at_value, ids).mean(),
            "expected": expected_value(at_value[:, ids], vals).detach()}


def answer_loss(model: Any, batch: dict[str, torch.Tensor], frozen: int | None = None
                ) -> torch.Tensor:
    """Cross-entropy on the labelled answer tokens of one `collate` batch (scalar)."""
    start = first_read(batch["labels"])
    logits = batch_logits(model, batch, start, frozen)
    return token_mean_loss(logits, batch["labels"][:, start:])


def mean_by_grade(scores: list[float], correct: list[bool]) -> dict[str, float | None]:
    """Mean score of the right and of the wrong answers (None for an empty side)."""
    right = [s for s, c in zip(scores, correct, strict=True) if c]
    wrong = [s for s, c in zip(scores, correct, strict=True) if not c]
    return {"right": sum(right) / len(right) if right else None,
            "wrong": sum(wrong) / len(wrong) if wrong else None}


class CalibrationRows:
    """The stage's training rows and the seeded draw of each step's batches."""

    def __init__(self, tokenizer: Any, examples: dict[int, Any], graded: list[GradedAnswer],
                 values: ValueTokens, config: CalibrateSettings) -> None:
        self.confidence = [confidence_row(tokenizer, examples[g.index], g, values,
                                          config.confidence_question) for g in graded]
        answers = (answer_row(tokenizer, examples[g.index], g) for g in graded if g.correct)
        self.answers = [a for a in answers if a is not None]
        self.rng = random.Random(f"calibrate-{config.seed}")
        self.config = config

    def draw(self) -> tuple[list[int], list[int]]:
        """The indices into `confidence` and `answers` of one step's rows."""
        k = min(self.config.batch_size, len(self.confidence))
        a = min(self.config.answer_batch_size, len(self.answers))
        return (self.rng.sample(range(len(self.confidence)), k),
                self.rng.sample(range(len(self.answers)), a))


class FrozenStates:
    """Every training row's states entering the lowest trained block (`lower_states`),
    computed once, so each step runs only the trained blocks (`upper_logits`).

    Rows go through in batches of like length; each keeps [T_row, H] on the CPU."""

    def __init__(self, model: Any, rows: CalibrationRows, pad: int, frozen: int, device: Any,
                 batch_size: int = 32, progress: bool = False) -> None:
        self.frozen = frozen
        total = len(rows.confidence) + len(rows.answers)
        with tqdm(total=total, desc="frozen blocks", disable=not progress) as bar:
            self.confidence = self._states(model, rows.confidence, pad, device, batch_size, bar)
            self.answers = self._states(model, rows.answers, pad, device, batch_size, bar)

    def _states(self, model: Any, rows: list[Any], pad: int, device: Any, batch_size: int,
                bar: Any) -> list[torch.Tensor]:
        out: list[torch.Tensor | None] = [None] * len(rows)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i].input_ids))
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            batch = collate([rows[i] for i in chunk], pad)
            states = lower_states(model, batch["input_ids"].to(device),
                                  batch["attention_mask"].to(device), self.frozen)  # [B, T, H]
            for b, i in enumerate(chunk):
                out[i] = states[b, :len(rows[i].input_ids)].cpu()
            bar.update(len(chunk))
        return out  # type: ignore[return-value]

    def batch(self, which: list[torch.Tensor], indices: list[int], width: int,
              device: Any) -> torch.Tensor:
        """[B, width, H] the states of rows `indices` of `which`, padded as `collate` pads."""
        return padded([which[i] for i in indices], width).to(device)


def frozen_states(model: Any, rows: CalibrationRows, pad: int, config: CalibrateSettings,
                  device: Any) -> FrozenStates | None:
    """`FrozenStates` when `config.frozen_states` asks for them and the split forward equals
    the full one on the first rows; None (every step runs the full forward) otherwise."""
    if (not config.frozen_states or config.train_layers is None or not rows.confidence
            or not splittable(model)):
        return None
    frozen = len(decoder_blocks(model)[0]) - config.train_layers
    if frozen <= 0:
        return None
    model.eval()  # the cached states carry no dropout; the trained blocks' own stays
    try:
        check = collate(rows.confidence[:config.batch_size], pad)
        if not matches_full_forward(model, check["input_ids"].to(device),
                                    check["attention_mask"].to(device), frozen):
            tqdm.write("calibrate: this model's forward cannot be split at its frozen blocks; "
                       "every step runs the full forward")
            return None
        return FrozenStates(model, rows, pad, frozen, device, progress=config.progress)
    finally:
        model.train()


def train_calibration(model: Any, tokenizer: Any, rows: CalibrationRows, values: ValueTokens,
                      config: CalibrateSettings, log: Any = None
                      ) -> tuple[Any, dict[str, float]]:
    """`config.steps` steps on `model` in place; returns the trained model without accelerate's
    wrappers and the mean losses of the last 20 steps, with `frozen_blocks`: how many lower
    blocks were read once (`frozen_states`; 0: every step ran the full forward)."""
    accelerator = make_accelerator(config)
    torch.manual_seed(config.seed)
    prepare_policy(model, train_layers=config.train_layers)
    model.train()
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=config.lr,
                                  weight_decay=config.weight_decay)
    prepared, optimizer = accelerator.prepare(model, optimizer)
    pad = pad_id(tokenizer)
    with accelerator.autocast():
        cache = frozen_states(model, rows, pad, config, accelerator.device)
    frozen = None if cache is None else cache.frozen
    recent: list[dict[str, float]] = []
    bar = tqdm(range(config.steps), desc="calibrate", disable=not config.progress)
    for step in bar:
        factor = lr_factor(step, step / max(config.steps - 1, 1), warmup_steps=config.warmup_steps,
                           scheduler=config.scheduler, min_lr_ratio=config.min_lr_ratio)
        for group in optimizer.param_groups:
            group["lr"] = config.lr * factor
        conf_at, ans_at = rows.draw()
        batch = {k: v.to(accelerator.device) for k, v in
                 confidence_batch([rows.confidence[i] for i in conf_at], pad).items()}
        if cache is not None:
            batch["states"] = cache.batch(cache.confidence, conf_at, batch["input_ids"].shape[1],
                                          accelerator.device)
        with accelerator.autocast():
            terms = confidence_terms(prepared, batch, values, config.loss, frozen)
            loss = terms["score"] + config.format_weight * (terms["format"] + terms["mass"])
            answer_ce = torch.zeros(())
            if ans_at and config.answer_weight > 0:
                ab = {k: v.to(accelerator.device) for k, v in
                      collate([rows.answers[i] for i in ans_at], pad).items()}
                if cache is not None:
                    ab["states"] = cache.batch(cache.answers, ans_at, ab["input_ids"].shape[1],
                                               accelerator.device)
                answer_ce = answer_loss(prepared, ab, frozen)
                loss = loss + config.answer_weight * answer_ce
        if not torch.isfinite(loss):
            raise UserError(f"calibrate step {step + 1}: non-finite loss; stopped before the "
                            "update (lower calibrate.lr)")
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(prepared.parameters(), config.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        row = {"step": step + 1, "lr": config.lr * factor, "loss": float(loss.detach()),
               **{k: float(terms[k].detach()) for k in ("score", "format", "mass")},
               "answer_ce": float(answer_ce.detach())}
        recent = (recent + [row])[-20:]
        if log is not None and (step + 1) % config.log_every == 0:
            log.write(json.dumps(row) + "\n")
        bar.set_postfix_str(f"score {row['score']:.3f}", refresh=False)
    trained = accelerator.unwrap_model(prepared, keep_fp32_wrapper=False).eval()
    keys = ("loss", "score", "format", "mass", "answer_ce")
    means = {k: sum(r[k] for r in recent) / len(recent) for k in keys} if recent else {}
    return trained, {**means, "frozen_blocks": frozen or 0}


@torch.no_grad()
def expected_confidences(model: Any, rows: list[ConfidenceRow], values: ValueTokens,
                         pad: int, batch_size: int = 64) -> list[float]:
    """The expected stated value of each row under `model` (eval mode, no gradients); only the
    value positions go through the output layer."""
    out: list[float] = []
    device = next(model.parameters()).device
    ids, vals = (t.to(device) for t in values.tensors())
    for start in range(0, len(rows), batch_size):
        batch = {k: v.to(device) for k, v in
                 confidence_batch(rows[start:start + batch_size], pad).items()}
        at_value = logits_at(model, batch["input_ids"], batch["attention_mask"],
                             batch["value_pos"] - 1)  # [B, V]
        out += expected_value(at_value[:, ids], vals).tolist()
    return out


def run_calibrate(config: CalibrateSettings) -> dict[str, Any]:
    """Sample and grade, tune, save `OUT/model`; returns the summary (also summary.json)."""
    from calibrl.models.loading import load_policy
    from calibrl.rollout.factory import make_engine
    from calibrl.tasks.files import load_examples

    out = Path(config.out)
    if (out / MODEL_DIR).exists() and not config.overwrite:
        raise already_holds(out, "a calibrated model")
    check_output_dir(out, "output folder")
    require_file(config.data)
    examples = load_examples(config.data)[: config.prompts]
    if not examples:
        raise no_rows(config.data)
    model, tokenizer = load_policy(config.model)
    values = value_tokens(tokenizer)
    start = time.perf_counter()
    engine = make_engine("hf", model, tokenizer, decode=config.decode)
    with tqdm(total=len(examples), desc="answer and grade", disable=not config.progress) as bar:
        graded = sample_graded(engine, tokenizer, examples, config, progress=bar.update,
                               model=model)
    sampled_s = time.perf_counter() - start
    rows = CalibrationRows(tokenizer, {ex.index: ex for ex in examples}, graded, values, config)
    labels = [g.correct for g in graded]
    stride = max(1, -(-len(rows.confidence) // config.summary_rows))  # at most summary_rows
    shown, shown_labels = rows.confidence[::stride], labels[::stride]
    before = expected_confidences(model.eval(), shown, values, pad_id(tokenizer))
    with atomic_dir(out) as tmp:
        (tmp / CONFIG_FILE).write_text(config.model_dump_json(indent=2) + "\n")
        (tmp / GRADED_FILE).write_text("".join(json.dumps(asdict(g)) + "\n" for g in graded))
        tuning = time.perf_counter()
        with (tmp / LOG_FILE).open("w", encoding="utf-8") as log:
            model, final = train_calibration(model, tokenizer, rows, values, config, log)
        tuning_s = time.perf_counter() - tuning
        after = expected_confidences(model, shown, values, pad_id(tokenizer))
        summary = {"answers": len(graded), "prompts": len(examples),
                   "accuracy": sum(labels) / len(labels), "target": config.target,
                   "loss": config.loss, "steps": config.steps,
                   "answer_rows": len(rows.answers), "sampling_s": sampled_s,
                   "tuning_s": tuning_s,
                   "seconds": time.perf_counter() - start, "final": final,
                   # The expected stated value on (at most summary_rows of) the training
                   # answers, by grade.
                   "summary_answers": len(shown),
                   "expected_before": mean_by_grade(before, shown_labels),
                   "expected_after": mean_by_grade(after, shown_labels)}
        (tmp / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
        model.save_pretrained(tmp / MODEL_DIR)
        tokenizer.save_pretrained(tmp / MODEL_DIR)
    return {**summary, "model_dir": str(out / MODEL_DIR)}
