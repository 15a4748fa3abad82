"""Countdown solver: checked against a slow brute force over every way to combine the numbers."""

import random
import re
from fractions import Fraction
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrl.errors import UserError
from calibrl.tasks.countdown import compute_score, validate_equation
from calibrl.tasks.countdown import solver as solver_module
from calibrl.tasks.countdown.solver import MAX_NUMBERS, is_solvable, solve


@cache
def brute_force(values: tuple, integer_only: bool) -> frozenset:
    """Every value reachable by repeatedly replacing two of `values` with a op b (sorted tuple)."""
    if len(values) == 1:
        return frozenset(values)
    reachable = set()
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            a, b = values[i], values[j]
            rest = values[:i] + values[i + 1 : j] + values[j + 1 :]
            results = {a + b, a * b, a - b, b - a}
            if b != 0:
                results.add(a / b)
            if a != 0:
                results.add(b / a)
            for r in results:
                if integer_only and (r.denominator != 1 or r < 0):
                    continue
                reachable |= brute_force(tuple(sorted((*rest, r))), integer_only)
    return frozenset(reachable)


def reachable(numbers, integer_only=False):
    return brute_force(tuple(sorted(Fraction(x) for x in numbers)), integer_only)


STEP = re.compile(r"^(\(?-?\d+(?:/\d+)?\)?) ([-+*/]) (\(?-?\d+(?:/\d+)?\)?) = (-?\d+(?:/\d+)?)$")


def check_solution(numbers, target, solution):
    """The expression scores 1.0, uses each number once, and the steps replay exactly to it."""
    ground_truth = {"target": target, "numbers": list(numbers)}
    assert compute_score(f"<answer>{solution.expression}</answer>", ground_truth) == 1.0
    assert validate_equation(solution.expression, numbers)
    assert len(solution.steps) == len(numbers) - 1
    pool = [Fraction(x) for x in numbers]  # values available to the next step
    for step in solution.steps:
        left, op, right, result = STEP.match(step).groups()
        a, b, r = (Fraction(s.strip("()")) for s in (left, right, result))
        pool.remove(a)
        pool.remove(b)
        assert {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[op] == r
        pool.append(r)
        if solution.integer_steps:
            assert r.denominator == 1 and r >= 0
    assert pool == [Fraction(target)]


def test_known_instances():
    solution = solve([12, 5, 3], 51)
    assert solution.steps == ("12 + 5 = 17", "3 * 17 = 51")
    assert solution.expression == "3 * (12 + 5)"
    assert solution.integer_steps
    for numbers, target in [([3, 3, 8, 8], 24), ([1, 3, 4, 6], 24), ([6, 4, 2], 3), ([7], 7)]:
        check_solution(numbers, target, solve(numbers, target))
    assert not solve([3, 3, 8, 8], 24).integer_steps  # only 8 / (3 - 8 / 3) reaches 24
    assert solve([7], 8) is None


def test_brackets_follow_the_tree():
    # a - (b + c) and a / (b * c) keep their brackets; the value must be right either way
    for numbers, target in [([20, 3, 4], 13), ([96, 3, 4], 8), ([2, 3, 100], 94)]:
        check_solution(numbers, target, solve(numbers, target))


@pytest.mark.parametrize("size", [2, 3, 4])
def test_matches_brute_force_on_random_instances(size):
    rng = random.Random(size)
    for _ in range(15 if size == 4 else 25):
        numbers = [rng.randint(0, 12) for _ in range(size)]
        exact, nice = reachable(numbers), reachable(numbers, integer_only=True)
        for target in range(-15, 60):
            solution = solve(numbers, target)
            assert (solution is not None) == (Fraction(target) in exact), (numbers, target)
            if solution is not None:
                check_solution(numbers, target, solution)
                # integer steps are preferred whenever they can reach the target
                assert solution.integer_steps == (Fraction(target) in nice), (numbers, target)


def test_five_numbers_match_brute_force():
    rng = random.Random(5)
    for numbers in [[0, 1, 2, 3, 4], [2, 2, 5, 9, 9], [rng.randint(1, 6) for _ in range(5)]]:
        exact = reachable(numbers)
        for target in range(-10, 80, 3):
            solution = solve(numbers, target)
            assert (solution is not None) == (Fraction(target) in exact), (numbers, target)
            if solution is not None:
                check_solution(numbers, target, solution)


def test_six_numbers():
    # 0 * (anything): the zero must pair up with a table-sized rest (see solver._Search.lookup)
    for numbers, target in [
        ([0, 5, 7, 9, 11, 13], 0),
        ([0, 100, 99, 98, 97, 96], 0),
        ([97, 89, 83, 79, 73, 71], 1),
        ([25, 50, 75, 100, 3, 6], 952),
    ]:
        check_solution(numbers, target, solve(numbers, target))
    assert solve([1, 1, 1, 1, 1, 1], 1000) is None  # at most 2 * 2 * 2 = 8
    assert solve([1, 2, 3, 4, 5, 6], 100_000) is None


@given(
    numbers=st.lists(st.integers(0, 9), min_size=1, max_size=4),
    target=st.integers(-30, 400),
)
@settings(max_examples=150)
def test_is_solvable_property(numbers, target):
    assert is_solvable(numbers, target) == (Fraction(target) in reachable(numbers))


def test_search_goes_on_when_the_float_check_fails(monkeypatch):
    calls = []

    def reject_first(solution_str, ground_truth):
        calls.append(solution_str)
        return 0.1 if len(calls) == 1 else compute_score(solution_str, ground_truth)

    monkeypatch.setattr(solver_module, "compute_score", reject_first)
    solution = solve([1, 2, 3], 6)  # 1 + 2 + 3 and 1 * 2 * 3 both reach 6
    assert solution is not None and len(calls) == 2
    assert f"<answer>{solution.expression}</answer>" != calls[0]


def test_deterministic():
    assert solve([25, 3, 7, 9], 77) == solve([25, 3, 7, 9], 77)


def test_bad_input():
    with pytest.raises(UserError, match="1 to 6 numbers"):
        solve(list(range(1, MAX_NUMBERS + 2)), 5)
    with pytest.raises(UserError, match="1 to 6 numbers"):
        solve([], 5)
    with pytest.raises(UserError, match="non-negative"):
        solve([3, -4], -1)
    for numbers, target in [([1.5, 2], 3), ([True, 2], 3), ([1, 2], 3.0), (["1", 2], 3)]:
        with pytest.raises(UserError, match="must be ints"):
            solve(numbers, target)


@pytest.mark.timeout(60)  # a hang guard; the speed itself is measured in benchmarks/solver.py
def test_random_four_number_instances_are_solved_or_proven_unsolvable():
    rng = random.Random(0)
    instances = [([rng.randint(1, 100) for _ in range(4)], rng.randint(1, 100)) for _ in range(20)]
    for numbers, target in instances:
        solution = solve(numbers, target)
        assert (solution is None) == (Fraction(target) not in reachable(numbers))
        if solution is not None:
            check_solution(numbers, target, solution)
