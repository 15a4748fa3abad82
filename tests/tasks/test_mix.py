from collections import Counter

import pytest

from calibrl.errors import UserError
from calibrl.tasks.countdown.data import examples_from_instances
from calibrl.tasks.countdown.generate import generate_countdown
from calibrl.tasks.mix import difficulty_of, mix_by_difficulty, resample_by_difficulty


def _examples():
    train, _ = generate_countdown(120, num_numbers=(2, 4), max_number=20, seed=1, test_size=0,
                                  size_weights=(1, 3, 2))
    return examples_from_instances(train, "train", "compact")


def test_the_subset_has_the_asked_ratio_and_is_as_large_as_the_scarcest_group_allows():
    examples = _examples()
    have = Counter(difficulty_of(e) for e in examples)
    subset = mix_by_difficulty(examples, {"2 numbers": 2, "3 numbers": 2, "4 numbers": 1})
    got = Counter(difficulty_of(e) for e in subset)
    unit = min(have["2 numbers"] / 2, have["3 numbers"] / 2, have["4 numbers"] / 1)
    assert got == {"2 numbers": int(unit * 2), "3 numbers": int(unit * 2),
                   "4 numbers": int(unit)}
    assert len({id(e) for e in subset}) == len(subset)
    assert mix_by_difficulty(examples, {"2 numbers": 2, "3 numbers": 2, "4 numbers": 1}) == subset


def test_groups_left_out_and_errors():
    examples = _examples()
    only = mix_by_difficulty(examples, {"3 numbers": 1, "4 numbers": 0})
    assert {difficulty_of(e) for e in only} == {"3 numbers"}
    with pytest.raises(UserError, match="no example of difficulty 9 numbers"):
        mix_by_difficulty(examples, {"9 numbers": 1})
    with pytest.raises(UserError, match="positive share"):
        mix_by_difficulty(examples, {"2 numbers": 0})


def _slow_resample_counts(examples, shares, n):
    """Obvious reference: exact group sizes by hand, rows counted per id."""
    total = sum(shares.values())
    exact = {g: n * s / total for g, s in shares.items()}
    sizes = {g: int(v) for g, v in exact.items()}
    while sum(sizes.values()) < n:
        g = max(exact, key=lambda g: exact[g] - sizes[g])
        exact[g] = sizes[g] + 1  # consume the remainder: it is rounded up once
        sizes[g] += 1
    return sizes


def test_resample_reaches_the_shares_by_repeating_scarce_rows_evenly():
    examples = _examples()
    shares = {"2 numbers": 2, "3 numbers": 2, "4 numbers": 1}
    rows = resample_by_difficulty(examples, shares, n=301, seed=3)
    assert len(rows) == 301
    assert Counter(difficulty_of(e) for e in rows) == _slow_resample_counts(examples, shares, 301)
    for group in shares:
        members = [e for e in examples if difficulty_of(e) == group]
        uses = Counter(id(e) for e in rows if difficulty_of(e) == group)
        counts = [uses[id(e)] for e in members]
        assert max(counts) - min(counts) <= 1  # every row as often as any other, ±1
    assert resample_by_difficulty(examples, shares, n=301, seed=3) == rows
    assert resample_by_difficulty(examples, shares, n=301, seed=4) != rows


def test_resample_errors():
    examples = _examples()
    with pytest.raises(UserError, match="at least one row"):
        resample_by_difficulty(examples, {"2 numbers": 1}, n=0)
    with pytest.raises(UserError, match="no example of difficulty 9 numbers"):
        resample_by_difficulty(examples, {"9 numbers": 1}, n=5)
