"""Countdown: TinyZero's reward functions (made safe) and the task built on them."""

from calibrl.tasks.base import register_task
from calibrl.tasks.countdown.reward import (
    compute_score,
    ensure_answer_tags,
    evaluate_equation,
    extract_solution,
    validate_equation,
    verify_equation_strict,
)
from calibrl.tasks.countdown.task import CountdownTask, user_prompt

COUNTDOWN = register_task(CountdownTask(), "countdown_3to4", "countdown_tasks")

__all__ = [
    "COUNTDOWN",
    "CountdownTask",
    "compute_score",
    "ensure_answer_tags",
    "evaluate_equation",
    "extract_solution",
    "user_prompt",
    "validate_equation",
    "verify_equation_strict",
]
