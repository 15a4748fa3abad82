"""The facts demo (`calibrl demo --config configs/demo_facts.yaml`): what differs from Countdown's.

A made-up world of countries and their capitals, languages, currencies and rulers
(`ShortAnswerTask.generate`), each country in an exposure group. The warm-up shows every fact
of a group's countries `data.exposure` times per pass of its data (0: never), the test
split asks about countries of every group, and the RL prompts are other countries of every
group. A model that knows what it knows says a high confidence on the facts it was shown often,
a lower one on those shown rarely, and a low one on countries it never saw; nothing in a
question says which group it is from.

The recipe's settings (`FactsDemoSettings`), the data stage and the report's opening line are
here; `calibrl.demo.pipeline` runs every other stage as it does for Countdown, without the
probe (an answer here has no chain of thought to cut).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from rich.console import Console
from rich.table import Table

from calibrl.data.example import TaskExample
from calibrl.demo.tables import reward_table
from calibrl.protocol.completions import answer_trace
from calibrl.settings.base import Section
from calibrl.settings.demo import DemoStages
from calibrl.tasks import get_task
from calibrl.tasks.files import write_splits
from calibrl.tasks.mix import difficulty_of, mix_by_difficulty

FACTS_TASK = "short_answer"
FACTS_RECIPE = "facts"  # the value of `recipe:` that marks a facts demo recipe


class FactsDataSection(Section):
    """The world of facts the demo generates and how often the warm-up shows each group."""

    n_facts: int = Field(gt=0, description="Facts generated (4 per country: capital, language, "
                         "currency, ruler), training and test split together.")
    test_size: int = Field(gt=0, description="Facts in the held-out test split (a multiple of "
                           "4 keeps every test country out of the RL prompts).")
    groups: tuple[str, ...] = Field(description="The exposure groups of countries: equal "
                                    "shares, interleaved in this order.")
    exposure: tuple[float, ...] = Field(description="Per group (in the order of `groups`): how "
                                        "many times each of its facts is in one pass of the "
                                        "warm-up's data; 0: never shown. A fraction f adds one "
                                        "more copy to a share f of the group's facts (drawn "
                                        "per fact, seeded): 0.5 shows half of them once and "
                                        "never the other half, a group the warm-up half knows.")
    values_per_attribute: int = Field(ge=2, description="Made-up names each attribute's values "
                                      "are drawn from (a guess is right about once in this "
                                      "many).")
    prompt_style: str = Field(description="The task's prompt style ('compact': the question "
                              "alone, for a tiny model trained from scratch).")

    @model_validator(mode="after")
    def _consistent(self) -> FactsDataSection:
        if not self.groups or len(set(self.groups)) != len(self.groups):
            raise ValueError(f"groups must be distinct names, got {list(self.groups)}")
        if len(self.exposure) != len(self.groups):
            raise ValueError(f"exposure needs one count per group ({len(self.groups)}), got "
                             f"{len(self.exposure)}")
        if any(not copies >= 0 for copies in self.exposure):  # also NaN
            raise ValueError(f"exposure counts must be >= 0, got {list(self.exposure)}")
        if not any(self.exposure):
            raise ValueError("exposure shows no group to the warm-up (every count is 0)")
        if self.test_size >= self.n_facts:
            raise ValueError(f"test_size ({self.test_size}) must be below n_facts "
                             f"({self.n_facts})")
        return self

    @property
    def copies(self) -> dict[str, float]:
        """`{group: exposure}`: each group's facts' copies in one pass of the warm-up's data
        (a fraction: the share of its facts shown one more time)."""
        return dict(zip(self.groups, self.exposure, strict=True))


class FactsDemoSettings(DemoStages):
    """data -> SFT -> eval before -> two-turn RLCR -> eval after -> report, on made-up facts."""

    recipe: Literal["facts"] = Field(description="Which demo the recipe runs: 'facts' (the "
                                     "Countdown recipe has no such key).")
    data: FactsDataSection = Field(description="The world of facts and its exposure groups.")


def is_facts_recipe(tree: Mapping[str, Any]) -> bool:
    """Whether a recipe's settings tree is a facts demo's (`recipe: facts`)."""
    return tree.get("recipe") == FACTS_RECIPE


def fact_copies(example: TaskExample, exposure: float, seed: int) -> int:
    """How many times `example` is in one pass: the whole part of `exposure`, plus one with
    probability its fraction (drawn from the seed and the question, so a fact keeps its draw
    whatever else the world holds)."""
    whole = math.floor(exposure)
    extra = random.Random(f"{seed}|{example.ground_truth['question']}").random() < exposure - whole
    return whole + int(extra)


def exposure_rows(examples: Sequence[TaskExample], copies: Mapping[str, float],
                  seed: int = 0) -> list[TaskExample]:
    """Each example `fact_copies` times for its difficulty's exposure (a group missing from
    `copies`: 0), the whole list shuffled with `seed`: the warm-up's rows."""
    rows = [example for example in examples
            for _ in range(fact_copies(example, copies.get(difficulty_of(example), 0), seed))]
    random.Random(seed).shuffle(rows)
    return rows


def reward_check(examples: Sequence[TaskExample], seed: int = 0) -> dict[str, Counter]:
    """The task's score of three answers to each example: its reference answer, another
    example's answer (wrong unless the two agree) and the reference without answer tags."""
    task, rng = get_task(FACTS_TASK), random.Random(seed)
    answers = [example.extra["solution"] for example in examples]
    kinds: dict[str, Counter] = {"reference": Counter(), "another answer": Counter(),
                                 "no answer tag": Counter()}
    for example, answer in zip(examples, answers, strict=True):
        trace = answer_trace([], answer)
        replies = {"reference": trace, "another answer": answer_trace([], rng.choice(answers)),
                   "no answer tag": answer}
        for kind, reply in replies.items():
            kinds[kind][task.score(reply, example.ground_truth)] += 1
    return kinds


def stage_facts_data(settings: FactsDemoSettings, console: Console) -> dict[str, Counter]:
    """Write the world's train/test split, the RL prompts and the warm-up's rows; print how
    many of each group and the reward of reference, other and untagged answers."""
    data = settings.data
    groups = data.groups
    train, test = get_task(FACTS_TASK).generate(
        data.n_facts, seed=settings.seed, test_size=data.test_size, style=data.prompt_style,
        groups=groups, values_per_attribute=data.values_per_attribute)
    # The warm-up shows the test split's facts of the groups it sees: knowing them is the point.
    sft_rows = exposure_rows(train + test, data.copies, seed=settings.seed)
    rl_rows = mix_by_difficulty(train, dict.fromkeys(groups, 1.0), seed=settings.seed)
    data_dir = Path(settings.out_dir) / "data"
    write_splits(data_dir, {"train": train, "test": test, "rl": rl_rows, "sft": sft_rows})

    table = Table(title=f"Facts in {data_dir}")
    for column in ("group", "shown per pass", "test facts", "RL prompts", "warm-up rows"):
        table.add_column(column, justify="left" if column == "group" else "right")
    counts = [Counter(difficulty_of(e) for e in rows) for rows in (test, rl_rows, sft_rows)]
    for group in groups:
        table.add_row(group, f"{data.copies[group]:g}", *(str(c[group]) for c in counts))
    console.print(table)
    kinds = reward_check(test, seed=settings.seed)
    console.print(reward_table("Short-answer reward on the test split", kinds, "no answer"))
    return kinds


def facts_intro(settings: FactsDemoSettings, count: Any) -> str:
    """The report's opening line: the world, the exposure groups and the evaluation."""
    data = settings.data
    shown = ", ".join(f"{group} {copies:g}" for group, copies in data.copies.items())
    return (f"Tiny model on {data.n_facts} facts of made-up countries (capital, language, "
            f"currency, ruler; values from {data.values_per_attribute} names each); the "
            f"warm-up shows each fact of a group's countries this many times per pass: "
            f"{shown}. Evaluation on {count} answers ({settings.eval.samples} per "
            f"held-out question, temperature {settings.eval.temperature}).\n")
