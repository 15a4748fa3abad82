"""A quick look at what SFT taught: generate on held-out problems in each format and score it.

Turn 1 (rlvr / two_turn format): share of completions with an answer the task's extractor finds
(`Task.extract_answer`), and accuracy (`Task.verify`). Turn 2 (two_turn): share of parseable
confidences, and the mean confidence on right and on wrong answers (after SFT these should be
about equal; RL is what should pull them apart). Single-turn RLCR: format rate
(`rlcr_format_ok`) and accuracy. Uses `model.generate` with left padding; greedy at temperature
0, else plain sampling (no top-k/p).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from calibrl.data.example import TaskExample
from calibrl.protocol.completions import answer_part
from calibrl.protocol.modes import RLCR, TWO_TURN
from calibrl.protocol.prompts import confidence_messages
from calibrl.rewards import parse_confidence, rlcr_format_ok
from calibrl.tasks import get_task
from calibrl.utils.eval_mode import eval_mode


@dataclass(frozen=True)
class CheckResult:
    """Rates over `n` problems; confidence means are None when no such answer parsed."""

    n: int
    temperature: float
    answer_format: float
    answer_accuracy: float
    confidence_format: float
    mean_confidence_right: float | None
    mean_confidence_wrong: float | None
    rlcr_format: float
    rlcr_accuracy: float

    def lines(self) -> list[str]:
        def mean(x: float | None) -> str:
            return "-" if x is None else f"{x:.2f}"

        return [
            f"check on {self.n} problems, temperature {self.temperature:g}:",
            f"  turn 1: format {self.answer_format:.1%}, accuracy {self.answer_accuracy:.1%}",
            f"  turn 2: confidence parsed {self.confidence_format:.1%}, mean on right "
            f"{mean(self.mean_confidence_right)}, on wrong {mean(self.mean_confidence_wrong)}",
            f"  rlcr:   format {self.rlcr_format:.1%}, accuracy {self.rlcr_accuracy:.1%}",
        ]


@torch.no_grad()
def generate(model, tokenizer, conversations: Sequence[list[dict[str, str]]], *,
             max_new_tokens: int, temperature: float = 0.0, batch_size: int = 64) -> list[str]:
    """The assistant reply to each conversation (special tokens removed, tags kept)."""
    device = next(model.parameters()).device
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # generation appends on the right
    sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
    options = sampling if temperature > 0 else {"do_sample": False}
    texts: list[str] = []
    try:
        with eval_mode(model):
            for start in range(0, len(conversations), batch_size):
                prompts = [tokenizer.apply_chat_template(m, tokenize=False,
                                                         add_generation_prompt=True)
                           for m in conversations[start:start + batch_size]]
                enc = tokenizer(prompts, return_tensors="pt", padding=True,
                                add_special_tokens=False)
                enc = {k: v.to(device) for k, v in enc.items()}
                out = model.generate(**enc, max_new_tokens=max_new_tokens,
                                     pad_token_id=tokenizer.pad_token_id,
                                     eos_token_id=tokenizer.eos_token_id, **options)
                new = out[:, enc["input_ids"].shape[1]:]
                texts += tokenizer.batch_decode(new, skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return texts


def _correct(text: str, example: TaskExample) -> bool:
    return get_task(example.data_source).verify(answer_part(text), example.ground_truth)


def _format_ok(text: str, example: TaskExample) -> bool:
    return get_task(example.data_source).extract_answer(answer_part(text)) is not None


def check_model(model, tokenizer, problems: Sequence[TaskExample], *, temperature: float = 0.0,
                seed: int = 0, max_answer_tokens: int = 128, max_confidence_tokens: int = 48,
                batch_size: int = 64) -> CheckResult:
    """Generate turn 1, turn 2 (on those answers) and single-turn RLCR for `problems`; score."""
    problems = list(problems)
    n = max(len(problems), 1)
    torch.manual_seed(seed)
    kw = {"temperature": temperature, "batch_size": batch_size}
    answers = generate(model, tokenizer,
                       [TWO_TURN.answer_prompt(ex.messages) for ex in problems],
                       max_new_tokens=max_answer_tokens, **kw)
    right = [_correct(a, ex) for a, ex in zip(answers, problems, strict=True)]
    replies = generate(model, tokenizer,
                       [confidence_messages(ex.messages, a) for a, ex in zip(answers, problems, strict=True)],
                       max_new_tokens=max_confidence_tokens, **kw)
    confidences = [parse_confidence(r) for r in replies]
    rlcr = generate(model, tokenizer, [RLCR.answer_prompt(ex.messages) for ex in problems],
                    max_new_tokens=max_answer_tokens + max_confidence_tokens, **kw)

    def mean_conf(want: bool) -> float | None:
        values = [c for c, r in zip(confidences, right, strict=True) if c is not None and r == want]
        return sum(values) / len(values) if values else None

    return CheckResult(
        n=len(problems),
        temperature=temperature,
        answer_format=sum(_format_ok(a, ex) for a, ex in zip(answers, problems, strict=True)) / n,
        answer_accuracy=sum(right) / n,
        confidence_format=sum(c is not None for c in confidences) / n,
        mean_confidence_right=mean_conf(True),
        mean_confidence_wrong=mean_conf(False),
        rlcr_format=sum(rlcr_format_ok(t) for t in rlcr) / n,
        rlcr_accuracy=sum(_correct(t, ex) for t, ex in zip(rlcr, problems, strict=True)) / n,
    )
