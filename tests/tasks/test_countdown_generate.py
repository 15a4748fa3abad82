"""Countdown generation: solvable, distinct, deterministic by seed, split as documented."""

import pytest

from calibrl.errors import UserError
from calibrl.tasks.countdown import compute_score
from calibrl.tasks.countdown.generate import (
    count_instances,
    generate_countdown,
    instance_key,
    resolve_test_size,
)


def keys(instances):
    return [instance_key(i.numbers, i.target) for i in instances]


def test_instances_are_solvable_and_within_the_ranges():
    train, test = generate_countdown(
        40, num_numbers=(3, 4), max_number=20, target_range=(10, 60), seed=1, test_size=8
    )
    assert (len(train), len(test)) == (32, 8)
    for inst in train + test:
        assert 3 <= len(inst.numbers) <= 4
        assert all(1 <= x <= 20 for x in inst.numbers)
        assert 10 <= inst.target <= 60
        answer = f"<answer>{inst.solution.expression}</answer>"
        assert compute_score(answer, inst.ground_truth) == 1.0
        assert len(inst.solution.steps) == len(inst.numbers) - 1
    assert {len(i.numbers) for i in train + test} == {3, 4}


def test_no_duplicates_within_or_across_splits():
    # a small space (3 numbers from 1..6, targets 1..20) makes repeats likely if not prevented
    train, test = generate_countdown(
        150, num_numbers=(3, 3), max_number=6, target_range=(1, 20), seed=0, test_fraction=0.2
    )
    all_keys = keys(train) + keys(test)
    assert len(set(all_keys)) == len(all_keys) == 150
    assert not set(keys(train)) & set(keys(test))
    assert len(test) == 30


def test_same_seed_same_data_other_seed_other_data():
    def run(seed):
        return generate_countdown(30, max_number=50, seed=seed, test_size=5)

    assert run(7) == run(7)
    assert keys(run(7)[0]) != keys(run(8)[0])


def test_test_split_is_stable_as_n_grows():
    small_train, small_test = generate_countdown(20, seed=3, test_size=5)
    big_train, big_test = generate_countdown(40, seed=3, test_size=5)
    assert big_test == small_test
    assert big_train[:15] == small_train


def test_resolve_test_size():
    assert resolve_test_size(100, 7, None) == 7
    assert resolve_test_size(100, None, 0.25) == 25
    assert resolve_test_size(100, None, None) == 10  # DEFAULT_TEST_FRACTION
    assert resolve_test_size(10, None, 1.0) == 10
    for size, fraction in [(1, 0.5), (11, None), (-1, None), (None, 1.5), (None, float("nan"))]:
        with pytest.raises(UserError):
            resolve_test_size(10, size, fraction)


def test_count_instances():
    # multisets of 2 from 1..3: 6; of 3: 10; times 5 targets
    assert count_instances((2, 3), 3, (1, 5)) == (6 + 10) * 5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_numbers": (5, 3)}, "1 <= min <= max"),
        ({"num_numbers": (0, 3)}, "1 <= min <= max"),
        ({"num_numbers": (3, 7)}, "1 <= min <= max"),
        ({"max_number": 0}, "max number"),
        ({"target_range": (10, 1)}, "target range is empty"),
        (
            {"num_numbers": (1, 1), "max_number": 2, "target_range": (1, 3)},
            "more than the 6 distinct",
        ),
        ({"n": 0}, "n must be at least 1"),
        ({"test_size": 11}, "test size must be in"),
        ({"test_size": 1, "test_fraction": 0.1}, "not both"),
    ],
)
def test_bad_configuration(kwargs, message):
    kwargs = {"n": 10, **kwargs}
    with pytest.raises(UserError, match=message):
        generate_countdown(**kwargs)


def test_gives_up_when_the_solvable_space_runs_out():
    # one number from 1..5, targets 1..10: 50 instances but only the 5 with target == number solve
    with pytest.raises(UserError, match="found only 5 of n=6"):
        generate_countdown(
            6, num_numbers=(1, 1), max_number=5, target_range=(1, 10), max_tries_per_row=500
        )


def test_size_weights_set_the_mix_of_sizes():
    train, test = generate_countdown(400, num_numbers=(2, 4), max_number=20, seed=0,
                                     test_size=400, size_weights=(1, 0, 3))
    sizes = [len(inst.numbers) for inst in test]
    assert 3 not in sizes
    assert 0.65 < sizes.count(4) / len(sizes) < 0.85  # expected 0.75; binomial sd 0.02
    assert train == []


def test_a_used_up_size_is_dropped_and_the_rest_follow_the_weights():
    # 1 number from 1..5 with targets 1..10: only 5 solvable instances exist
    train, test = generate_countdown(40, num_numbers=(1, 2), max_number=5, target_range=(1, 10),
                                     seed=0, test_size=4, size_weights=(1, 1),
                                     max_tries_per_row=500)
    ones = [inst for inst in train + test if len(inst.numbers) == 1]
    assert len(ones) == 5 and len(train) + len(test) == 40
    assert all(inst.target == inst.numbers[0] for inst in ones)


def test_running_out_of_every_weighted_size_is_a_clear_error():
    # size 1 (5 solvable instances) is the only one with weight: used up, nothing left to draw
    with pytest.raises(UserError, match="found only 5 of n=6"):
        generate_countdown(6, num_numbers=(1, 2), max_number=5, target_range=(1, 10),
                           size_weights=(1, 0), max_tries_per_row=500)


@pytest.mark.parametrize("weights, message", [
    ((1, 1), "one size weight per size"),
    ((0, 0, 0), "not all 0"),
    ((1, float("nan"), 1), "must be finite"),
])
def test_bad_size_weights(weights, message):
    with pytest.raises(UserError, match=message):
        generate_countdown(10, num_numbers=(2, 4), size_weights=weights)
