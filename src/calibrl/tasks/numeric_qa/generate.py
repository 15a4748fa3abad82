"""Generate multi-step arithmetic word problems, seeded, with their worked steps.

A problem: someone has a number of things, then `k` events change it (buys, finds, gets: +;
gives away, loses, sells: -; ends up with 2 or 3 times as many: *), then the question asks how
many they have now. `k` is the problem's number of steps, its difficulty group. Every
intermediate count stays in 0..`MAX_VALUE`, so each number is one token of the tiny tokenizer.

How a problem is drawn (all from one `random.Random(seed)`, so a seed fixes the output): its `k`
uniform in `num_steps = (lo, hi)`; a person, a kind of thing and a start count in
1..`max_operand`; then each event: an operation uniform over those that keep the count in
range, a sentence for it, an operand (1..`max_operand` for + and -, at most the count for -; 2
or 3 for *). A question drawn before is drawn again. The first test-size problems are the test
split (`calibrl.tasks.splits`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from calibrl.errors import UserError
from calibrl.tasks.splits import resolve_test_size

DEFAULT_NUM_STEPS = (1, 3)
DEFAULT_MAX_OPERAND = 20
MAX_VALUE = 999
MAX_TRIES_PER_ROW = 1000

PEOPLE = (("Tom", "he"), ("Anna", "she"), ("Sam", "he"), ("Mia", "she"), ("Ben", "he"),
          ("Lily", "she"))
THINGS = (("apple", "apples"), ("book", "books"), ("coin", "coins"), ("marble", "marbles"),
          ("sticker", "stickers"), ("pencil", "pencils"), ("card", "cards"), ("shell", "shells"))
# Per operation: its symbol in a worked step, how it changes a count, and its sentences
# ("{who}" is the pronoun, capitalised; "{n}" the operand).
OPERATIONS: dict[str, tuple[Callable[[int, int], int], tuple[str, ...]]] = {
    "+": (lambda a, b: a + b, ("{who} buys {n} more.", "{who} finds {n} more.",
                               "{who} gets {n} more from a friend.")),
    "-": (lambda a, b: a - b, ("{who} gives away {n}.", "{who} loses {n}.", "{who} sells {n}.")),
    "*": (lambda a, b: a * b, ("{who} ends up with {n} times as many.",)),
}


@dataclass(frozen=True)
class WordProblem:
    """One generated problem: the question, its answer and the worked steps (`"3 + 4 = 7"`)."""

    question: str
    answer: int
    steps: tuple[str, ...]

    @property
    def num_steps(self) -> int:
        return len(self.steps)


def _count(n: int, thing: tuple[str, str]) -> str:
    return f"{n} {thing[0] if n == 1 else thing[1]}"


def _operand(op: str, value: int, max_operand: int, rng: random.Random) -> int | None:
    """An operand of `op` that keeps `value` in 0..MAX_VALUE, or None if there is none."""
    if op == "+":
        top = min(max_operand, MAX_VALUE - value)
        return rng.randint(1, top) if top >= 1 else None
    if op == "-":
        return rng.randint(1, min(max_operand, value)) if value >= 1 else None
    factors = [f for f in (2, 3) if value * f <= MAX_VALUE]
    return rng.choice(factors) if factors and value >= 1 else None


def draw_problem(k: int, max_operand: int, rng: random.Random) -> WordProblem:
    """One problem of `k` steps (`k >= 1`) with operands up to `max_operand`."""
    name, pronoun = rng.choice(PEOPLE)
    thing = rng.choice(THINGS)
    value = rng.randint(1, max_operand)
    sentences, steps = [f"{name} has {_count(value, thing)}."], []
    for _ in range(k):
        choices = [(op, n) for op in OPERATIONS
                   if (n := _operand(op, value, max_operand, rng)) is not None]
        op, n = rng.choice(choices)  # "-" is always possible unless value is 0, "+" then is
        apply, templates = OPERATIONS[op]
        sentences.append(rng.choice(templates).format(who=pronoun.capitalize(), n=n))
        new_value = apply(value, n)
        steps.append(f"{value} {op} {n} = {new_value}")
        value = new_value
    sentences.append(f"How many {thing[1]} does {name} have now?")
    return WordProblem(" ".join(sentences), value, tuple(steps))


def generate_word_problems(
    n: int, *, num_steps: tuple[int, int] = DEFAULT_NUM_STEPS,
    max_operand: int = DEFAULT_MAX_OPERAND, seed: int = 0, test_size: int | None = None,
    test_fraction: float | None = None,
) -> tuple[list[WordProblem], list[WordProblem]]:
    """`n` distinct problems as (train, test); see the module doc for how they are drawn."""
    lo, hi = num_steps
    if n < 1:
        raise UserError(f"n must be at least 1, got {n}")
    if not 1 <= lo <= hi:
        raise UserError(f"num_steps must be LO..HI with 1 <= LO <= HI, got {lo}..{hi}")
    if not 1 <= max_operand <= MAX_VALUE:
        raise UserError(f"max_operand must be in 1..{MAX_VALUE}, got {max_operand}")
    n_test = resolve_test_size(n, test_size, test_fraction)
    rng = random.Random(seed)
    problems: list[WordProblem] = []
    seen: set[str] = set()
    for _ in range(n):
        k = rng.randint(lo, hi)
        for _ in range(MAX_TRIES_PER_ROW):
            problem = draw_problem(k, max_operand, rng)
            if problem.question not in seen:
                break
        else:
            raise UserError(f"ran out of new {k}-step problems after {len(problems)}; "
                            "lower n or raise max_operand")
        seen.add(problem.question)
        problems.append(problem)
    return problems[n_test:], problems[:n_test]
