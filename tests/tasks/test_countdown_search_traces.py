"""Search traces: failed attempts before the solution, checked against a slow replay."""

from __future__ import annotations

import random
import re
from fractions import Fraction

from calibrl.protocol.completions import answer_part
from calibrl.tasks import get_task
from calibrl.tasks.countdown import verify_equation_strict
from calibrl.tasks.countdown.data import examples_from_instances
from calibrl.tasks.countdown.generate import generate_countdown
from calibrl.tasks.countdown.traces import failed_attempt, failed_attempts, with_failed_attempts
from calibrl.training.sft_data import draw_failed_attempts

STEP = re.compile(r"(\d+) ([-+*/]) (\d+) = (\d+)")
COUNTDOWN = get_task("countdown")


def problems(sizes=(3, 4), n=60, seed=3):
    train, _ = generate_countdown(n, num_numbers=sizes, max_number=20, seed=seed, test_size=0)
    return examples_from_instances(train, "train")


def replay(numbers, steps):
    """Slow check of one attempt: each step uses two values still on the table (given numbers
    or earlier results), its arithmetic is right, and the result goes back on the table."""
    table = list(numbers)
    for line in steps:
        a, op, b, value = STEP.fullmatch(line).groups()
        a, b, value = int(a), int(b), int(value)
        table.remove(a)
        table.remove(b)
        exact = {"+": a + b, "-": a - b, "*": a * b, "/": Fraction(a, b) if b else None}[op]
        assert exact == value and value >= 0, line
        table.append(value)
    assert len(table) == 1
    return table[0]


def test_failed_attempts_are_true_arithmetic_that_misses_the_target():
    rng = random.Random(0)
    seen = 0
    for ex in problems():
        gt = ex.ground_truth
        for steps, expression in failed_attempts(gt["numbers"], gt["target"], 3, rng):
            seen += 1
            final = replay(gt["numbers"], steps)
            assert final != gt["target"]
            assert len(steps) == len(gt["numbers"]) - 1
            # The expression is the attempt: it uses every number once and is worth `final`.
            assert STEP.fullmatch(steps[-1]).group(4) == str(final)
            assert not verify_equation_strict(f"<answer>{expression}</answer>", gt["target"],
                                              gt["numbers"])
            assert verify_equation_strict(f"<answer>{expression}</answer>", final, gt["numbers"])
    assert seen > 100


def test_the_last_step_of_an_attempt_is_the_one_closest_to_the_target():
    rng = random.Random(1)
    for ex in problems(sizes=(3, 3)):
        gt = ex.ground_truth
        for steps, _ in failed_attempts(gt["numbers"], gt["target"], 2, rng):
            a, _, b, value = STEP.fullmatch(steps[-1]).groups()
            a, b = int(a), int(b)
            options = [a + b, a * b] + ([a - b] if a >= b else []) + (
                [a // b] if b and a % b == 0 else [])
            assert abs(int(value) - gt["target"]) == min(abs(v - gt["target"]) for v in options)


def test_two_numbers_have_no_failed_attempt():
    rng = random.Random(0)
    for ex in problems(sizes=(2, 2), n=30):
        gt = ex.ground_truth
        assert all(failed_attempt(gt["numbers"], gt["target"], rng) is None for _ in range(5))
        assert COUNTDOWN.reference_trace(ex, rng, 3) == COUNTDOWN.reference_trace(ex)


def test_search_traces_end_with_the_solution_and_still_verify():
    rng = random.Random(2)
    longer = 0
    for ex in problems():
        plain = COUNTDOWN.reference_trace(ex)
        search = COUNTDOWN.reference_trace(ex, rng, 2)
        assert verify_equation_strict(answer_part(search), ex.ground_truth["target"],
                                      ex.ground_truth["numbers"])
        assert search.endswith(plain.removeprefix("<think>\n"))
        lines = search.split("\n")[1:search.split("\n").index("</think>")]
        size = len(ex.ground_truth["numbers"]) - 1
        assert len(lines) % size == 0 and len(lines) <= 3 * size
        longer += len(lines) > size
        wrong = COUNTDOWN.wrong_trace(ex, rng, 2)
        assert not verify_equation_strict(answer_part(wrong), ex.ground_truth["target"],
                                          ex.ground_truth["numbers"])
    assert longer > 40


def test_no_attempts_leaves_the_trace_alone():
    rng = random.Random(0)
    ex = problems()[0]
    trace = COUNTDOWN.reference_trace(ex)
    assert with_failed_attempts(trace, ex.ground_truth, 0, rng) == trace
    assert COUNTDOWN.reference_trace(ex, rng, 0) == trace


def test_failed_attempt_counts_are_geometric_and_capped():
    rng = random.Random(0)
    counts = [draw_failed_attempts(rng, 0.5, 3) for _ in range(20_000)]
    shares = [counts.count(k) / len(counts) for k in range(5)]
    for k, expected in enumerate((0.5, 0.25, 0.125, 0.125, 0.0)):
        assert abs(shares[k] - expected) < 0.015, (k, shares)
    assert {draw_failed_attempts(rng, 0.0, 3) for _ in range(100)} == {0}
    assert {draw_failed_attempts(rng, 0.9, 0) for _ in range(100)} == {0}
