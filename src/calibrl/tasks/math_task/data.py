"""Math data sets: GSM8K and MATH rows converted to train/test examples, and the check of a
math ground truth read from a file.

Ground truth `{"question": str, "answer": str, "difficulty": str | None}`: `answer` is the
reference final answer (plain text or LaTeX), `difficulty` the group metrics are reported by
(MATH's `level`; None: unknown, reported as "all"). An example's `extra` holds `"solution"`,
the reference answer.

Three row formats are read, told apart by their fields:

- GSM8K (`openai/gsm8k`): `question`, `answer` (the worked solution ending in `#### 72`);
- MATH (`hendrycks/competition_math`): `problem`, `solution` (with the answer in its last
  `\\boxed{…}`), optional `level` ("Level 3") and `type`;
- plain: `question` (or `problem`), `answer` (the final answer), optional `difficulty`/`level`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from calibrl.data.example import TaskExample, short_repr
from calibrl.data.parquet import verl_schema
from calibrl.errors import UserError
from calibrl.tasks.base import Conversion
from calibrl.tasks.convert import convert_rows, read_mapped_rows
from calibrl.tasks.math_task.answers import last_boxed
from calibrl.tasks.math_task.prompts import make_messages

SOURCE = "math"
ABILITY = "math"
GSM8K_MARK = "####"
# The columns `row_ground_truth` reads: the targets a column mapping may name.
COLUMNS = ("question", "problem", "answer", "solution", "difficulty", "level")


def arrow_schema() -> pa.Schema:
    """Math rows: ground truth `{question, answer, difficulty}`, and `solution`."""
    return verl_schema(pa.struct([("question", pa.string()), ("answer", pa.string()),
                                  ("difficulty", pa.string())]), [("solution", pa.string())])


def _text(value: Any, what: str) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{what} is {short_repr(value)}, expected a non-empty string")
    return value.strip()


def _difficulty(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise UserError(f"difficulty is {short_repr(value)}, expected a string or null")
    return value.strip()


def math_ground_truth(ground_truth: Any) -> dict[str, Any]:
    """`{"question", "answer", "difficulty"}` checked and normalised, else `UserError`.
    Normalising twice gives the same value, so a written file reads back unchanged."""
    if not isinstance(ground_truth, Mapping):
        raise UserError(f"ground_truth is {short_repr(ground_truth)}, expected a mapping")
    for key in ("question", "answer"):
        if key not in ground_truth:
            raise UserError(f"ground_truth has no {key!r}")
    question = ground_truth["question"]
    if not isinstance(question, str) or not question.strip():
        raise UserError(f"question is {short_repr(question)}, expected a non-empty string")
    return {"question": question, "answer": _text(ground_truth["answer"], "answer"),
            "difficulty": _difficulty(ground_truth.get("difficulty"))}


def gsm8k_answer(solution: str) -> str:
    """The final answer after GSM8K's `####`, thousands separators dropped."""
    if not isinstance(solution, str) or GSM8K_MARK not in solution:
        raise UserError(f"GSM8K answer {short_repr(solution)} has no '{GSM8K_MARK} <answer>'")
    return _text(solution.rsplit(GSM8K_MARK, 1)[1].replace(",", ""), "GSM8K answer")


def row_ground_truth(row: Any) -> dict[str, Any]:
    """The ground truth of one GSM8K, MATH or plain row (module docstring); `UserError` saying
    what is wrong if it is none of them."""
    if not isinstance(row, Mapping):
        raise UserError(f"row is {short_repr(row)}, expected an object")
    question = row.get("question", row.get("problem"))
    if question is None:
        raise UserError("missing 'question': expected a GSM8K {question, answer: '... #### 72'}, "
                        "MATH {problem, solution, level} or {question, answer} row")
    if "solution" in row and "answer" not in row:  # MATH
        answer = last_boxed(row["solution"]) if isinstance(row["solution"], str) else None
        if not answer:
            raise UserError(f"MATH solution {short_repr(row['solution'])} has no \\boxed{{…}}")
    elif "answer" in row:
        answer = row["answer"]
        if isinstance(answer, str) and GSM8K_MARK in answer:
            answer = gsm8k_answer(answer)
    else:
        raise UserError("missing 'answer' (GSM8K, plain rows) or 'solution' (MATH)")
    difficulty = row.get("difficulty", row.get("level"))
    return math_ground_truth({"question": question, "answer": answer,
                              "difficulty": difficulty})


def math_example(ground_truth: dict[str, Any], index: int, split: str,
                 style: str) -> TaskExample:
    """An example posing `ground_truth` in `style`, its reference answer the solution."""
    return TaskExample(SOURCE, make_messages(ground_truth, style), ground_truth, index, split,
                       {"solution": ground_truth["answer"]}, ABILITY)


def convert_math_file(path: str | Path, *, n: int | None = None,
                      test_size: int | None = None, test_fraction: float | None = None,
                      style: str, columns: Mapping[str, str] | None = None) -> Conversion:
    """Rows of a file, folder or Hub data set (`calibrl.data.sources`) as math train/test
    examples, in file order; a problem seen before (up to spacing) is dropped. `columns`
    (`{target: source}`, targets from `COLUMNS`) names columns the data hold under other
    names."""
    rows = read_mapped_rows(path, columns, known=COLUMNS, reader="the math converter")
    return convert_rows(
        rows, path, parse=row_ground_truth,
        key=lambda gt: " ".join(gt["question"].split()),
        example=lambda gt, i, split: math_example(gt, i, split, style),
        n=n, test_size=test_size, test_fraction=test_fraction)
