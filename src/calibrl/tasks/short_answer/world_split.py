"""Splitting world facts by entity, and the rows they become.

Two facts that share an entity (`WorldFact.entities`: "capital of France" and "In which country
is Lyon?" share France; it and "In which country is Paris?" share Paris) are linked, and every
linked set (a connected component) goes to one split whole. So no entity of a test question, its
subject or its answer, appears in any training question: a model cannot have trained on the
capital of France, nor on France at all, when it is tested on it. The components, in an order
drawn by `seed`, are taken into the test split while they fit in `test_fraction` of the facts
and bring its counts of the groups (`type/tier`) no farther from the groups' shares: a split by
entity that keeps each group's share, so train and test are as hard as each other (an
unstratified split of the default facts differed by 9-20 % of the rows in its mix of groups).
What is left is the training split. With `recalibration_fraction`, a third split is taken out of
it the same way, by linked set and stratified, for fitting a map of the stated confidence on
entities no training question names (its own draws: the test split stays as it is without it).
A held-out type (`hold_out`) is not split: every fact of it goes to the `held_out` split (its
entities may appear in training questions of other types), so a type can stay out of every stage
and test whether what was learnt carries over to a new kind of question.
Each split's rows are then ordered by `seed` so that every prefix holds each group in about its
share (`interleaved`): the first rows a stage takes are a fair sample of the split.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Iterable, Sequence

from calibrl.data.example import TaskExample
from calibrl.errors import UserError
from calibrl.tasks.short_answer.data import short_answer_example
from calibrl.tasks.short_answer.world_facts import read_world_facts
from calibrl.tasks.short_answer.world_types import (
    DEFAULT_TEST_FRACTION,
    FACT_TYPES,
    TIER_ORDER,
    WorldFact,
    parse_types,
)

HELD_OUT = "held_out"  # the split name of held-out types' facts
RECALIBRATION = "recalibration"  # the split whose answers fit a map of the stated confidence


def components(facts: Sequence[WorldFact]) -> list[list[int]]:
    """The indices of `facts` in linked sets (facts linked when they share an entity), each set
    in index order and the sets by their first index."""
    parent = list(range(len(facts)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]  # path halving keeps the trees flat
            i = parent[i]
        return i

    first_with: dict[str, int] = {}
    for i, fact in enumerate(facts):
        for entity in fact.entities:
            j = first_with.setdefault(entity, i)
            parent[root(i)] = root(j)
    sets: dict[int, list[int]] = {}
    for i in range(len(facts)):
        sets.setdefault(root(i), []).append(i)
    return sorted(sets.values(), key=lambda members: members[0])


def split_world_facts(facts: Sequence[WorldFact], *, seed: int = 0,
                      test_fraction: float = DEFAULT_TEST_FRACTION,
                      hold_out: Iterable[str] = (), recalibration_fraction: float = 0.0
                      ) -> dict[str, list[WorldFact]]:
    """{"train", "test"} (and `HELD_OUT` when `hold_out` names types, `RECALIBRATION` when
    `recalibration_fraction` > 0) as the module doc says; the test split holds at most
    `round(test_fraction * n)` of the n facts split, the recalibration split at most
    `round(recalibration_fraction * n)`."""
    for name, fraction in (("test", test_fraction), ("recalibration", recalibration_fraction)):
        if not 0.0 <= fraction <= 1.0:  # also false for NaN
            raise UserError(f"{name} fraction must be in [0, 1], got {fraction}")
    held_types = set(parse_types(hold_out)) if hold_out else set()
    rng = random.Random(seed)
    held = [f for f in facts if f.fact_type in held_types]
    rest = [f for f in facts if f.fact_type not in held_types]
    if not rest:
        raise UserError("every fact type is held out: nothing is left to train or test on")
    in_test = stratified_linked_sets([f.group for f in rest], components(rest),
                                     round(test_fraction * len(rest)), rng)
    splits = {"train": [f for i, f in enumerate(rest) if i not in in_test],
              "test": [f for i, f in enumerate(rest) if i in in_test]}
    if held_types:
        splits[HELD_OUT] = held
    splits = {name: interleaved(rows, rng) for name, rows in splits.items()}
    if recalibration_fraction > 0:
        train, side = splits["train"], random.Random(f"{RECALIBRATION} {seed}")
        taken = stratified_linked_sets([f.group for f in train], components(train),
                                       round(recalibration_fraction * len(rest)), side)
        # What is left keeps its interleaved order: the taken sets are a stratified sample.
        splits["train"] = [f for i, f in enumerate(train) if i not in taken]
        splits[RECALIBRATION] = interleaved([train[i] for i in sorted(taken)], side)
    return splits


def stratified_linked_sets(groups: Sequence[str], linked: Sequence[Sequence[int]],
                           target: int, rng: random.Random) -> set[int]:
    """The indices (into `groups`, one group per fact) of a split taken by linked set (the test
    split, the recalibration split): the linked sets in `rng`'s order, each taken where the
    total stays <= `target` and it does not raise the summed squared distance of every group's
    count from its share (`target` x the group's count / all facts). Taking the best set each
    time gets nearer the shares, but puts most of the same facts in every seed's test split."""
    total = Counter(groups)
    share = {g: target * n / len(groups) for g, n in total.items()}
    order = list(linked)
    rng.shuffle(order)
    taken: Counter = Counter()
    in_test: set[int] = set()
    for members in order:
        if len(in_test) + len(members) > target:
            continue
        adds = Counter(groups[i] for i in members)
        change = sum((taken[g] + k - share[g]) ** 2 - (taken[g] - share[g]) ** 2
                     for g, k in adds.items())
        if change <= 0:
            taken.update(adds)
            in_test.update(members)
    return in_test


def interleaved(rows: Sequence[WorldFact], rng: random.Random) -> list[WorldFact]:
    """`rows` shuffled within each group and merged so that the r-th of a group's n rows sits at
    (r + u) / n of the way, u uniform in [0, 1): any prefix of k rows then holds each group's
    share of k within 1 + (number of groups) x the group's fraction."""
    members: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        members.setdefault(row.group, []).append(i)
    placed = []
    for group in sorted(members):  # sorted: the same rng draws whatever order rows came in
        indices = members[group]
        rng.shuffle(indices)
        placed += [((r + rng.random()) / len(indices), i) for r, i in enumerate(indices)]
    return [rows[i] for _, i in sorted(placed)]


def world_examples(facts: Sequence[WorldFact], split: str, style: str) -> list[TaskExample]:
    """Facts as short-answer examples of `split`, indexed 0.. in order: the accepted answers,
    the group as the difficulty; `extra_info` adds the `fact_type` and the `entities`."""
    examples = []
    for i, fact in enumerate(facts):
        example = short_answer_example({"question": fact.question, "answers": list(fact.answers),
                                        "difficulty": fact.group}, i, split, style)
        examples.append(dataclasses.replace(example, extra={
            **example.extra, "fact_type": fact.fact_type, "entities": list(fact.entities)}))
    return examples


def world_splits(types: Sequence[str], hold_out: Sequence[str] = (), *, seed: int = 0,
                 test_fraction: float = DEFAULT_TEST_FRACTION, style: str = "instruct",
                 recalibration_fraction: float = 0.0, **options: int
                 ) -> tuple[dict[str, list[TaskExample]], str]:
    """The world's facts of `types` (read with `options`, see `read_world_facts`), split
    (`split_world_facts`) and made examples of `style`; with the splits' `count_table`."""
    splits = split_world_facts(read_world_facts(types, **options), seed=seed,
                               test_fraction=test_fraction, hold_out=hold_out,
                               recalibration_fraction=recalibration_fraction)
    examples = {name: world_examples(rows, name, style) for name, rows in splits.items()}
    return examples, count_table(splits)


def count_table(splits: dict[str, Sequence[WorldFact]]) -> str:
    """The facts of each split counted by type and, under each type, by group, as a text table
    (one column per split, a last row of totals)."""
    names = list(splits)
    labels = sorted({(f.fact_type, f.tier) for facts in splits.values() for f in facts},
                    key=lambda pair: (FACT_TYPES.index(pair[0]), TIER_ORDER.index(pair[1])))
    rows = [("", *names)]
    for fact_type in dict.fromkeys(t for t, _ in labels):
        rows.append((fact_type, *(str(sum(f.fact_type == fact_type for f in splits[s]))
                                  for s in names)))
        rows += [(f"  {t}/{level}", *(str(sum((f.fact_type, f.tier) == (t, level)
                                                  for f in splits[s])) for s in names))
                 for t, level in labels if t == fact_type]
    rows.append(("all", *(str(len(splits[s])) for s in names)))
    width = max(len(row[0]) for row in rows)
    widths = [max(len(row[k]) for row in rows) for k in range(1, len(names) + 1)]
    return "\n".join(row[0].ljust(width) + "".join(f"  {cell:>{w}}" for cell, w in
                                                   zip(row[1:], widths, strict=True))
                     for row in rows)
