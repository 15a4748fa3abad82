"""The evaluator `calibrl train` hands to the trainer for `data.eval_path`.

The same generation, verification and metrics as `calibrl eval` (`evaluate_examples`,
`summarize`), run on the trainer's live model and engine: answers in the run's mode, with the
rollout's token limits, sampling filters and confidence question, `eval.samples` per problem at
`eval.temperature`. Every evaluation of a run uses the same seed, so the numbers of two steps
differ by the model only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from calibrl.data import TaskExample
from calibrl.evaluation.run import evaluate_examples
from calibrl.evaluation.summary import summarize
from calibrl.protocol.modes import get_mode
from calibrl.settings import EvalSection, TrainSettings

# What is logged of `summarize`'s keys (a None is left out: AUROC when all answers agree, the
# calibration metrics when too few confidences parsed).
LOGGED = ("accuracy", "ece", "brier", "auroc", "aurc", "mean_confidence", "format_failure_rate",
          "unparsable_confidence_rate")


def eval_section(cfg: TrainSettings) -> EvalSection:
    """The `calibrl eval` settings that match a run's held-out evaluation."""
    rollout = cfg.rollout
    return EvalSection.create(
        mode=cfg.algorithm.mode, samples=cfg.eval.samples, temperature=cfg.eval.temperature,
        top_p=rollout.top_p, top_k=rollout.top_k, max_answer_tokens=rollout.max_answer_tokens,
        max_confidence_tokens=rollout.max_confidence_tokens,
        confidence_question=rollout.confidence_question, batch_prompts=cfg.eval.batch_prompts,
        seed=cfg.seed, readout=False)  # the logged metrics do not use it


class HeldOutEvaluator:
    """`(model, tokenizer, examples, engine) -> {"accuracy": ..., "ece": ..., ...}`."""

    def __init__(self, settings: EvalSection, *, max_prompt_tokens: int = 256,
                 chat_template: str = "auto") -> None:
        self.settings = settings
        self.prompt = {"max_prompt_tokens": max_prompt_tokens, "chat_template": chat_template}
        self.with_confidence = get_mode(settings.mode).states_confidence

    def __call__(self, model: Any, tokenizer: Any, examples: Sequence[TaskExample],
                 engine: Any) -> Mapping[str, float]:
        # The logged metrics read the sampled confidence: no pass for the expected value.
        rows = evaluate_examples(model, tokenizer, examples, self.settings, engine=engine,
                                 progress=False, stated_expected=False, **self.prompt)
        metrics = summarize(rows, with_confidence=self.with_confidence)  # rows are records
        return {key: float(metrics[key]) for key in LOGGED if metrics[key] is not None}


def held_out_evaluator(cfg: TrainSettings) -> HeldOutEvaluator:
    return HeldOutEvaluator(eval_section(cfg), max_prompt_tokens=cfg.data.max_prompt_tokens,
                            chat_template=cfg.model.chat_template)
