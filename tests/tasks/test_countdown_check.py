"""The numbers check (`Task.analysis` of Countdown) against a slow, obvious reference."""

from __future__ import annotations

import random
import re

from calibrl.tasks import get_task
from calibrl.tasks.countdown import verify_equation_strict
from calibrl.tasks.countdown.check import NO_ANSWER, check_flags_wrong_numbers, numbers_check


def reference(equation_numbers: list[int], given: list[int]) -> list[str]:
    """Mark each equation number by scanning the given list for an unused equal entry."""
    used = [False] * len(given)
    lines = []
    for value in equation_numbers:
        for i, g in enumerate(given):
            if g == value and not used[i]:
                used[i] = True
                lines.append(f"{value} given")
                break
        else:
            lines.append(f"{value} again" if value in given else f"{value} not given")
    lines += [f"{g} not used" for i, g in enumerate(given) if not used[i]]
    return lines


def test_numbers_check_matches_the_reference_on_random_equations():
    rng = random.Random(0)
    for _ in range(2000):
        given = [rng.randint(1, 12) for _ in range(rng.randint(2, 4))]
        used = [rng.choice(given + [rng.randint(1, 30)]) for _ in range(rng.randint(1, 5))]
        ops = [rng.choice("+-*/") for _ in used[1:]]
        equation = "".join(f"{n} {o} " for n, o in zip(used, ops, strict=False)) + str(used[-1])
        assert numbers_check(equation, given).split("\n") == reference(used, given)


def test_the_check_flags_exactly_the_answers_with_wrong_numbers():
    given, target = [3, 7, 8], 29
    cases = {"3 * 7 + 8": False, "(8 - 3) * 7": False, "3 * 8 + 7": False,
             "3 * 7 + 7": True, "3 * 7": True, "3 * 7 + 8 + 1": True, "21 + 8": True}
    for equation, wrong_numbers in cases.items():
        text = numbers_check(equation, given)
        assert check_flags_wrong_numbers(text) is wrong_numbers, (equation, text)
        if not wrong_numbers:
            assert text == "\n".join(f"{n} given" for n in re.findall(r"\d+", equation))
    # the check reads numbers, not values: a wrong value with the right numbers is not flagged
    assert not verify_equation_strict("3 * 8 + 7", target, given)
    assert numbers_check(None, given) == NO_ANSWER and check_flags_wrong_numbers(NO_ANSWER)


def test_the_task_examines_the_last_answer_of_a_completion():
    task = get_task("countdown")
    gt = {"target": 43, "numbers": [16, 27]}
    completion = "<think>\n16 + 21 = 37\n</think>\n<answer>16 + 21</answer>"
    assert task.analysis(completion, gt) == "16 given\n21 not given\n27 not used"
    assert task.analysis("<think>no answer</think>", gt) == NO_ANSWER
    assert get_task("multiple_choice").analysis(
        "<answer>A</answer>", {"question": "Capital?", "choices": ["Paris", "Rome"],
                               "answer": "A"}) is None
