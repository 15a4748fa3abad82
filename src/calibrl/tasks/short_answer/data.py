"""Short-answer data sets: public question/answer rows converted to train/test examples, and the
check of a short-answer ground truth read from a file.

Ground truth `{"question": str, "answers": [str, ...], "difficulty": str | None}`: `answers`
are the accepted answers (a question's aliases), the first being the one a reference trace
gives; `difficulty` is the group metrics are reported by (HotpotQA's `level`; None: unknown).
An example's `extra` holds `"solution"`, the first accepted answer (`calibrl sft` trains on
rows that have one).

Three row formats are read, told apart by their fields:

- TriviaQA (`mandarjoshi/trivia_qa`): `question`, `answer: {value, aliases, normalized_aliases,
  ...}`; every one of `value`, `aliases` and `normalized_aliases` is accepted;
- HotpotQA (`hotpot_qa`): `question`, `answer` (one string), `level` (easy/medium/hard); the
  same shape reads SimpleQA's `problem`, `answer` rows;
- plain: `question`, `answers` (a list of strings, one string, or SQuAD's `{text: [...], ...}`),
  with an optional `difficulty` (or `level`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from calibrl.data.example import TaskExample, short_repr
from calibrl.data.parquet import verl_schema
from calibrl.errors import UserError
from calibrl.tasks.base import Conversion
from calibrl.tasks.convert import convert_rows, read_mapped_rows
from calibrl.tasks.short_answer.facts import Fact
from calibrl.tasks.short_answer.normalize import normalize_answer
from calibrl.tasks.short_answer.prompts import make_messages

SOURCE = "short_answer"
ABILITY = "qa"  # verl's `ability` column: these are not math problems
QUESTION_KEYS = ("question", "problem")  # SimpleQA names its question `problem`
DIFFICULTY_KEYS = ("difficulty", "level")  # HotpotQA's is `level`
TRIVIAQA_KEYS = ("value", "aliases", "normalized_aliases")
# The columns `row_ground_truth` reads: the targets a column mapping may name.
COLUMNS = (*QUESTION_KEYS, "answer", "answers", *DIFFICULTY_KEYS)


def arrow_schema() -> pa.Schema:
    """Short-answer rows: ground truth `{question, answers, difficulty}`, and `solution`."""
    return verl_schema(pa.struct([("question", pa.string()), ("answers", pa.list_(pa.string())),
                                  ("difficulty", pa.string())]), [("solution", pa.string())])


def question_key(question: str) -> str:
    """Questions that differ only in spacing are the same problem."""
    return " ".join(question.split())


def accepted_answers(answers: Any) -> list[str]:
    """The distinct accepted answers, in order: a later answer that normalises to an earlier
    one's text (`normalize_answer`) adds nothing and is dropped, and so is one that normalises
    to nothing ("The"), which would otherwise accept an empty reply. `UserError` when no
    answer is left or one is not a string."""
    if isinstance(answers, str) or not isinstance(answers, Sequence):
        raise UserError(f"answers is {short_repr(answers)}, expected a list of strings")
    kept: dict[str, str] = {}
    for answer in answers:
        if not isinstance(answer, str):
            raise UserError(f"answer {short_repr(answer)} is not a string")
        kept.setdefault(normalize_answer(answer), answer.strip())
    kept.pop("", None)
    if not kept:
        raise UserError(f"no usable answer in {short_repr(list(answers))} (each is empty once "
                        "case, punctuation and articles are dropped)")
    return list(kept.values())


def _difficulty(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # a numbered level (1..5) is a group name like any other
    if not isinstance(value, str):
        raise UserError(f"difficulty is {short_repr(value)}, expected a string or null")
    return value.strip()


def short_answer_ground_truth(ground_truth: Any) -> dict[str, Any]:
    """`{"question", "answers", "difficulty"}` checked and normalised, else `UserError`.
    Normalising twice gives the same value, so a written file reads back unchanged."""
    if not isinstance(ground_truth, Mapping):
        raise UserError(f"ground_truth is {short_repr(ground_truth)}, expected a mapping")
    for key in ("question", "answers"):
        if key not in ground_truth:
            raise UserError(f"ground_truth has no {key!r}")
    question = ground_truth["question"]
    if not isinstance(question, str) or not question.strip():
        raise UserError(f"question is {short_repr(question)}, expected a non-empty string")
    return {"question": question, "answers": accepted_answers(ground_truth["answers"]),
            "difficulty": _difficulty(ground_truth.get("difficulty"))}


def _triviaqa_answers(answer: Mapping[str, Any]) -> list[str]:
    if not any(key in answer for key in TRIVIAQA_KEYS):
        raise UserError(f"answer is {short_repr(answer)}, expected TriviaQA's "
                        f"{{{', '.join(TRIVIAQA_KEYS)}}}")
    value = answer.get("value")
    answers = [value] if value is not None else []
    for key in TRIVIAQA_KEYS[1:]:
        aliases = answer.get(key) or []
        answers += [aliases] if isinstance(aliases, str) else list(aliases)
    return answers


def _plain_answers(answers: Any) -> Any:
    if isinstance(answers, str):
        return [answers]
    if isinstance(answers, Mapping) and "text" in answers:  # SQuAD: {text: [...], answer_start}
        return answers["text"]
    return answers


def row_ground_truth(row: Any) -> dict[str, Any]:
    """The ground truth of one TriviaQA, HotpotQA or plain row (module docstring); `UserError`
    saying what is wrong if it is none of them."""
    if not isinstance(row, Mapping):
        raise UserError(f"row is {short_repr(row)}, expected an object")
    question_field = next((key for key in QUESTION_KEYS if key in row), None)
    if question_field is None:
        raise UserError("missing 'question': expected a TriviaQA {question, answer: {value, "
                        "aliases}}, HotpotQA {question, answer, level} or {question, answers} row")
    if "answers" in row:
        answers = _plain_answers(row["answers"])
    elif "answer" in row:
        answer = row["answer"]
        answers = _triviaqa_answers(answer) if isinstance(answer, Mapping) else [answer]
    else:
        raise UserError("missing 'answer' (TriviaQA, HotpotQA) or 'answers' (plain rows)")
    difficulty = next((row[key] for key in DIFFICULTY_KEYS if row.get(key) is not None), None)
    return short_answer_ground_truth({"question": row[question_field], "answers": answers,
                                      "difficulty": difficulty})


def short_answer_example(ground_truth: dict[str, Any], index: int, split: str,
                         style: str) -> TaskExample:
    """An example posing `ground_truth` in `style`, its first accepted answer the solution."""
    return TaskExample(SOURCE, make_messages(ground_truth, style), ground_truth, index, split,
                       {"solution": ground_truth["answers"][0]}, ABILITY)


def examples_from_facts(facts: Sequence[Fact], split: str, style: str) -> list[TaskExample]:
    """Generated facts (`calibrl.tasks.short_answer.facts`) as examples of `split`, indexed 0..
    in order: the one answer accepted, the exposure group the difficulty."""
    return [short_answer_example({"question": f.question, "answers": [f.answer],
                                  "difficulty": f.group}, i, split, style)
            for i, f in enumerate(facts)]


def convert_answer_file(path: str | Path, *, n: int | None = None,
                        test_size: int | None = None, test_fraction: float | None = None,
                        style: str, columns: Mapping[str, str] | None = None) -> Conversion:
    """Rows of a file, folder or Hub data set (`calibrl.data.sources`) as short-answer
    train/test examples, in file order; `columns` (`{target: source}`, targets from `COLUMNS`)
    names columns the data hold under other names.

    A question seen before (up to spacing) is dropped; the first `n` kept rows (all if None)
    are split as generated data are: the first test-size rows are the test split.
    """
    rows = read_mapped_rows(path, columns, known=COLUMNS, reader="the short_answer converter")
    return convert_rows(
        rows, path, parse=row_ground_truth,
        key=lambda gt: question_key(gt["question"]),
        example=lambda gt, i, split: short_answer_example(gt, i, split, style),
        n=n, test_size=test_size, test_fraction=test_fraction)
