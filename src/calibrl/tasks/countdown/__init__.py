"""Countdown: TinyZero's reward functions (made safe) and the task built on them.

Everything outside this package reaches Countdown through the task registry
(`calibrl.tasks.get_task("countdown")`, which registers `COUNTDOWN`), never by importing it. The
data-set builders are in `calibrl.tasks.countdown.data` (not imported here: they need pyarrow,
scoring does not).
"""

from calibrl.tasks.countdown.prompts import user_prompt
from calibrl.tasks.countdown.reward import (
    compute_score,
    evaluate_equation,
    extract_solution,
    validate_equation,
    verify_equation_strict,
)
from calibrl.tasks.countdown.task import CountdownTask

COUNTDOWN = CountdownTask()

__all__ = [
    "COUNTDOWN",
    "CountdownTask",
    "compute_score",
    "evaluate_equation",
    "extract_solution",
    "user_prompt",
    "validate_equation",
    "verify_equation_strict",
]
