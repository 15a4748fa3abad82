"""The generated world of facts: deterministic by seed, every name distinct, countries in exposure
groups interleaved by their weights, test countries apart from training ones, and rows that the
short-answer task poses, verifies and writes like any other."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import pytest

from calibrl.errors import UserError
from calibrl.protocol.completions import answer_trace
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples, write_splits
from calibrl.tasks.short_answer.facts import (
    ATTRIBUTES,
    DEFAULT_GROUPS,
    draw_new_name,
    generate_facts,
    interleave_groups,
)

SHORT_ANSWER = get_task("short_answer")


def test_same_seed_same_world_other_seed_other_world():
    assert generate_facts(60, seed=3, test_size=12) == generate_facts(60, seed=3, test_size=12)
    assert generate_facts(60, seed=3, test_size=12) != generate_facts(60, seed=4, test_size=12)


def test_test_split_is_stable_as_n_grows():
    small_train, small_test = generate_facts(40, seed=2, test_size=12)
    big_train, big_test = generate_facts(80, seed=2, test_size=12)
    assert big_test == small_test and big_train[:28] == small_train


def test_each_country_has_every_attribute_once_and_one_group():
    train, test = generate_facts(400, seed=0, test_size=100)
    by_country = defaultdict(list)
    for fact in test + train:
        by_country[fact.country].append(fact)
    assert len(by_country) == 100
    templates = dict(ATTRIBUTES)
    for facts in by_country.values():
        assert [f.attribute for f in facts] == [name for name, _ in ATTRIBUTES]
        assert len({f.group for f in facts}) == 1
        assert all(f.question == templates[f.attribute].format(f.country) for f in facts)


def test_names_are_distinct_and_answers_come_from_a_pool_per_attribute():
    train, test = generate_facts(800, seed=1, test_size=100, values_per_attribute=12)
    facts = test + train
    countries = {f.country.lower() for f in facts}
    values = defaultdict(set)
    for fact in facts:
        values[fact.attribute].add(fact.answer.lower())
    assert all(len(pool) <= 12 for pool in values.values())
    all_values = [v for pool in values.values() for v in pool]
    assert len(set(all_values)) == len(all_values)  # no value in two attributes' pools
    assert not countries & set(all_values)
    assert len({f.question for f in facts}) == len(facts)


def test_draw_new_name_never_repeats_and_records_what_it_drew():
    rng, taken = random.Random(0), set()
    names = [draw_new_name((2, 3), rng, taken) for _ in range(300)]
    assert len({n.lower() for n in names}) == 300 and taken == {n.lower() for n in names}
    with pytest.raises(UserError, match="ran out of new names"):
        tiny = set()
        for _ in range(2000):  # 20 onsets x 5 vowels x 7 codas = at most 700 one-syllable names
            draw_new_name((1, 1), rng, tiny)


def _interleave_reference(n, weights):
    """Greedy by hand: the group whose count is furthest below its share of the next prefix."""
    counts, out = [0] * len(weights), []
    for i in range(1, n + 1):
        best = None
        for g, w in enumerate(weights):
            deficit = w * i / sum(weights) - counts[g]
            if best is None or deficit > best[0]:
                best = (deficit, g)
        counts[best[1]] += 1
        out.append(best[1])
    return out


@pytest.mark.parametrize("weights", [(1, 1, 1), (2, 1, 1), (1, 0, 3), (0.5, 0.25), (5,)])
def test_interleave_groups_keeps_every_prefix_at_its_shares(weights):
    order = interleave_groups(50, weights)
    assert order == _interleave_reference(50, weights)
    counts = Counter()
    for i, group in enumerate(order, start=1):
        counts[group] += 1
        for g, w in enumerate(weights):
            assert abs(counts[g] - w * i / sum(weights)) <= 1
    assert all(counts[g] == 0 for g, w in enumerate(weights) if w == 0)


def test_equal_weights_take_turns():
    assert interleave_groups(7, (1, 1, 1)) == [0, 1, 2, 0, 1, 2, 0]


def test_a_test_size_of_whole_countries_keeps_test_countries_out_of_training():
    train, test = generate_facts(240, seed=5, test_size=60)
    assert not {f.country for f in train} & {f.country for f in test}
    assert Counter(f.group for f in test) == dict.fromkeys(DEFAULT_GROUPS, 20)


@pytest.mark.parametrize("options, message", [
    ({"groups": ()}, "groups must be distinct"),
    ({"groups": ("a", "a")}, "groups must be distinct"),
    ({"group_weights": (1, 1)}, "one weight per group"),
    ({"group_weights": (0, 0, 0)}, "positive sum"),
    ({"values_per_attribute": 1}, "at least 2"),
    ({"test_size": 50}, "test size must be in"),
])
def test_bad_options_are_user_errors(options, message):
    with pytest.raises(UserError, match=message):
        generate_facts(40, **options)


def test_task_generate_poses_verifies_and_writes_facts(tmp_path):
    train, test = SHORT_ANSWER.generate(48, seed=0, test_size=12, style="compact",
                                        groups=("seen", "unseen"), values_per_attribute=8)
    assert [e.index for e in test] == list(range(12)) and len(train) == 36
    for example in test + train:
        truth = example.ground_truth
        assert example.messages == [{"role": "user", "content": truth["question"]}]
        assert example.extra["solution"] == truth["answers"][0]
        assert SHORT_ANSWER.difficulty(truth) in ("seen", "unseen")
        assert SHORT_ANSWER.score(answer_trace([], truth["answers"][0]), truth) == 1.0
    write_splits(tmp_path, {"train": train, "test": test})
    assert load_examples(tmp_path / "test.parquet") == test


def test_the_tokenizer_corpus_holds_the_question_templates():
    texts = " ".join(SHORT_ANSWER.corpus_texts(random.Random(0)))
    for _, template in ATTRIBUTES:
        assert template.format("X") in texts


def test_analysis_restates_the_question_and_answer_never_the_verdict():
    truth = {"question": "What is the capital of Daruvin?", "answers": ["Tesho"],
             "difficulty": "often"}
    right = SHORT_ANSWER.analysis(answer_trace([], "Tesho"), truth)
    wrong = SHORT_ANSWER.analysis(answer_trace([], "Bilo"), truth)
    assert right == "What is the capital of Daruvin? My answer: Tesho."
    assert wrong == right.replace("Tesho", "Bilo")  # the same words, right or wrong
    assert SHORT_ANSWER.analysis("no answer block", truth).endswith("My answer: none.")
