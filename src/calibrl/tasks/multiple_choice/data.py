"""Multiple-choice data sets: public rows converted to train/test examples (choices shuffled by
a seed), and the check of a multiple-choice ground truth read from a file.

Ground truth `{"question": str, "choices": [str, ...], "answer": "B", "difficulty": str | None}`:
`choices` in the order the prompt shows them (after any shuffle), `answer` the correct one's
letter in that order, `difficulty` the group metrics are reported by (None: the number of
choices). An example's `extra` holds `"solution"`, the correct letter (`calibrl sft` trains on
rows that have one). Three row formats are read, told apart by their fields:

- CommonsenseQA (`tau/commonsense_qa`): `question`, `choices: {label: [...], text: [...]}`,
  `answerKey` (one of the labels; the unlabelled test split cannot be converted);
- GPQA (`Idavidrein/gpqa`): `Question`, `Correct Answer`, `Incorrect Answer 1..3`, and
  `Writer's Difficulty Estimate` as the difficulty (its words before the bracket, e.g. "Hard
  graduate level"); its correct answer always comes first, so it needs the shuffle;
- plain (MMLU's shape): `question`, `choices` (a list of strings), `answer` (a letter or a
  0-based index), with an optional `difficulty` (or `level`).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

import pyarrow as pa

from calibrl.data.example import TaskExample, as_integer, short_repr
from calibrl.data.parquet import verl_schema
from calibrl.errors import UserError
from calibrl.tasks.base import Conversion
from calibrl.tasks.convert import convert_rows, read_mapped_rows
from calibrl.tasks.multiple_choice.choices import (
    LETTERS,
    MAX_CHOICES,
    choice_key,
    letter,
    shuffle_choices,
)
from calibrl.tasks.multiple_choice.prompts import make_messages

SOURCE = "multiple_choice"
ABILITY = "qa"  # verl's `ability` column: these are not math problems
GPQA_QUESTION, GPQA_CORRECT, GPQA_DIFFICULTY = ("Question", "Correct Answer",
                                                "Writer's Difficulty Estimate")
GPQA_INCORRECT = "Incorrect Answer {}"
DIFFICULTY_KEYS = ("difficulty", "level")
# The columns `row_ground_truth` reads: the targets a column mapping may name.
COLUMNS = ("question", "choices", "answer", "answerKey", *DIFFICULTY_KEYS, GPQA_QUESTION,
           GPQA_CORRECT, *(GPQA_INCORRECT.format(i) for i in range(1, MAX_CHOICES)),
           GPQA_DIFFICULTY)
_COLUMNS_LISTED = (f"question, choices, answer, answerKey, difficulty, level, {GPQA_QUESTION}, "
                   f"{GPQA_CORRECT}, {GPQA_INCORRECT.format('1')}..{MAX_CHOICES - 1}, "
                   f"{GPQA_DIFFICULTY}")


def arrow_schema() -> pa.Schema:
    """Multiple-choice rows: ground truth `{question, choices, answer, difficulty}`, and
    `solution`."""
    return verl_schema(pa.struct([("question", pa.string()), ("choices", pa.list_(pa.string())),
                                  ("answer", pa.string()), ("difficulty", pa.string())]),
                       [("solution", pa.string())])


def _choices(choices: Any) -> list[str]:
    if isinstance(choices, str) or not isinstance(choices, Sequence):
        raise UserError(f"choices is {short_repr(choices)}, expected a list of strings")
    if not 2 <= len(choices) <= MAX_CHOICES:
        raise UserError(f"{len(choices)} choices, expected 2 to {MAX_CHOICES}")
    out, seen = [], set()
    for choice in choices:
        if not isinstance(choice, str) or not choice.strip():
            raise UserError(f"choice {short_repr(choice)} is not a non-empty string")
        if choice_key(choice) in seen:  # the answer could not tell the two apart
            raise UserError(f"choice {short_repr(choice.strip())} is given twice")
        seen.add(choice_key(choice))
        out.append(choice.strip())
    return out


def _difficulty(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, Integral) and not isinstance(value, bool):
        return str(value)  # a numbered level is a group name like any other
    if not isinstance(value, str):
        raise UserError(f"difficulty is {short_repr(value)}, expected a string or null")
    return value.strip()


def choice_ground_truth(ground_truth: Any) -> dict[str, Any]:
    """`{"question", "choices", "answer", "difficulty"}` checked and normalised (choices
    stripped, the letter upper case), else `UserError`. Normalising twice gives the same
    value, so a written file reads back unchanged."""
    if not isinstance(ground_truth, Mapping):
        raise UserError(f"ground_truth is {short_repr(ground_truth)}, expected a mapping")
    for key in ("question", "choices", "answer"):
        if key not in ground_truth:
            raise UserError(f"ground_truth has no {key!r}")
    question = ground_truth["question"]
    if not isinstance(question, str) or not question.strip():
        raise UserError(f"question is {short_repr(question)}, expected a non-empty string")
    choices = _choices(ground_truth["choices"])
    answer = ground_truth["answer"]
    if not isinstance(answer, str) or answer.strip().upper() not in LETTERS[:len(choices)]:
        raise UserError(f"answer is {short_repr(answer)}, expected one of the letters "
                        f"A..{letter(len(choices) - 1)}")
    return {"question": question, "choices": choices, "answer": answer.strip().upper(),
            "difficulty": _difficulty(ground_truth.get("difficulty"))}


def problem_key(ground_truth: Mapping[str, Any]) -> Hashable:
    """The question up to spacing and its choices in any order: the same row shuffled
    otherwise is the same problem."""
    return (" ".join(ground_truth["question"].split()),
            tuple(sorted(choice_key(c) for c in ground_truth["choices"])))


# --- public rows -------------------------------------------------------------------------------

def _commonsense_qa(row: Mapping[str, Any]) -> tuple[Any, Any, int, Any]:
    choices = row["choices"]
    labels, texts = choices.get("label"), choices.get("text")
    if not isinstance(labels, Sequence) or not isinstance(texts, Sequence) or len(labels) != len(
            texts):
        raise UserError(f"choices is {short_repr(choices)}, expected {{label: [...], text: "
                        "[...]}} of one length")
    key = row.get("answerKey")
    if key not in labels:
        raise UserError(f"answerKey is {short_repr(key)}, expected one of the labels "
                        f"{', '.join(map(str, labels))} (the unlabelled test split cannot be "
                        "converted)")
    difficulty = next((row[k] for k in DIFFICULTY_KEYS if row.get(k) is not None), None)
    return row.get("question"), texts, list(labels).index(key), difficulty


def _gpqa(row: Mapping[str, Any]) -> tuple[Any, Any, int, Any]:
    incorrect = [row[GPQA_INCORRECT.format(i)] for i in range(1, MAX_CHOICES)
                 if row.get(GPQA_INCORRECT.format(i)) is not None]
    estimate = row.get(GPQA_DIFFICULTY)
    if isinstance(estimate, str):  # "Hard graduate level (could be a question on ...)"
        estimate = estimate.split(" (")[0]
    return row[GPQA_QUESTION], [row[GPQA_CORRECT], *incorrect], 0, estimate


def _plain(row: Mapping[str, Any]) -> tuple[Any, Any, int, Any]:
    if "answer" not in row:
        raise UserError("missing 'answer': expected a letter or a 0-based index")
    answer = row["answer"]
    if isinstance(answer, str) and answer.strip().upper() in LETTERS:
        index = LETTERS.index(answer.strip().upper())
    else:
        index = as_integer(answer, "answer")
    difficulty = next((row[k] for k in DIFFICULTY_KEYS if row.get(k) is not None), None)
    return row.get("question"), row["choices"], index, difficulty


def row_ground_truth(row: Any, *, shuffle: bool = True, seed: int = 0) -> dict[str, Any]:
    """The ground truth of one CommonsenseQA, GPQA or plain row (module docstring), its choices
    shuffled by `seed` and the row's own text (`choices.shuffled_order`) unless `shuffle` is
    off; `UserError` saying what is wrong if it is none of the formats."""
    if not isinstance(row, Mapping):
        raise UserError(f"row is {short_repr(row)}, expected an object")
    if GPQA_QUESTION in row and GPQA_CORRECT in row:
        question, choices, correct, difficulty = _gpqa(row)
    elif isinstance(row.get("choices"), Mapping):
        question, choices, correct, difficulty = _commonsense_qa(row)
    elif "choices" in row:
        question, choices, correct, difficulty = _plain(row)
    else:
        raise UserError("expected a CommonsenseQA {question, choices: {label, text}, answerKey}, "
                        "GPQA {Question, Correct Answer, Incorrect Answer 1..3} or {question, "
                        "choices, answer} row")
    truth = choice_ground_truth({"question": question, "choices": choices,
                                 "answer": letter(correct) if 0 <= correct < MAX_CHOICES
                                 else str(correct),  # an index past the letters: said so
                                 "difficulty": difficulty})
    if shuffle:
        # Keyed by the row's content before shuffling, so the order depends on the row and the
        # seed alone, not on where the row sits in its file.
        key = json.dumps([truth["question"], truth["choices"]])
        shown, at = shuffle_choices(truth["choices"], LETTERS.index(truth["answer"]), seed, key)
        truth = {**truth, "choices": shown, "answer": letter(at)}
    return truth


def choice_example(ground_truth: dict[str, Any], index: int, split: str,
                   style: str) -> TaskExample:
    """An example posing `ground_truth` in `style`, the correct letter its solution."""
    return TaskExample(SOURCE, make_messages(ground_truth, style), ground_truth, index, split,
                       {"solution": ground_truth["answer"]}, ABILITY)


def convert_choice_file(path: str | Path, *, n: int | None = None,
                        test_size: int | None = None, test_fraction: float | None = None,
                        style: str, shuffle: bool = True, seed: int = 0,
                        columns: Mapping[str, str] | None = None) -> Conversion:
    """Rows of a file, folder or Hub data set (`calibrl.data.sources`) as multiple-choice
    train/test examples, in file order, choices shuffled as `row_ground_truth` does.

    A problem seen before (`problem_key`) is dropped; the first `n` kept rows (all if None)
    are split as generated data are: the first test-size rows are the test split. `columns`
    (`{target: source}`, targets from `COLUMNS`) names columns the data hold under other names.
    """
    rows = read_mapped_rows(path, columns, known=COLUMNS, reader="the multiple_choice converter",
                            listed=_COLUMNS_LISTED)
    return convert_rows(
        rows, path,
        parse=lambda row: row_ground_truth(row, shuffle=shuffle, seed=seed), key=problem_key,
        example=lambda gt, i, split: choice_example(gt, i, split, style),
        n=n, test_size=test_size, test_fraction=test_fraction)
