"""Numeric QA data sets as train/test examples: generated word problems, or question/answer rows
converted, and the check of a numeric QA ground truth read from a file.

Ground truth `{"question": str, "answer": str, "num_steps": int | None}`: the answer in
canonical text (`numbers.format_number`), `num_steps` the difficulty group (None: unknown). The
question is part of it because it is what tells two problems apart (`Task.problem_key`). An
example's `extra` holds `"solution"` (the canonical answer) and `"steps"` (the worked steps,
empty when the source had none), which `calibrl sft` trains on; `arrow_schema` gives their
parquet types.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from calibrl.data.example import TaskExample, as_integer
from calibrl.data.parquet import read_rows, verl_schema
from calibrl.errors import UserError
from calibrl.tasks.base import Conversion
from calibrl.tasks.convert import convert_rows
from calibrl.tasks.numeric_qa.generate import WordProblem
from calibrl.tasks.numeric_qa.numbers import format_number, gsm8k_solution, parse_truth
from calibrl.tasks.numeric_qa.prompts import make_messages

SOURCE = "numeric_qa"
COLUMNS = ("question", "answer")


def arrow_schema() -> pa.Schema:
    """Numeric QA rows: ground truth `{question, answer, num_steps}`, `solution` and `steps`."""
    return verl_schema(
        pa.struct([("question", pa.string()), ("answer", pa.string()), ("num_steps", pa.int64())]),
        [("solution", pa.string()), ("steps", pa.list_(pa.string()))],
    )


def numeric_ground_truth(ground_truth: Any) -> dict[str, Any]:
    """`{"question", "answer", "num_steps"}` checked and normalised, else `UserError`."""
    if not isinstance(ground_truth, Mapping):
        raise UserError(f"ground_truth is {ground_truth!r}, expected a mapping")
    for key in COLUMNS:
        if key not in ground_truth:
            raise UserError(f"ground_truth has no {key!r}")
    question = ground_truth["question"]
    if not isinstance(question, str) or not question.strip():
        raise UserError(f"question is {question!r:.60}, expected a non-empty string")
    num_steps = ground_truth.get("num_steps")
    if num_steps is not None:
        num_steps = as_integer(num_steps, "num_steps")
        if num_steps < 0:
            raise UserError(f"num_steps is {num_steps}, expected at least 0")
    answer = format_number(parse_truth(ground_truth["answer"]))
    return {"question": question, "answer": answer, "num_steps": num_steps}


def question_key(question: str) -> str:
    """Questions that differ only in spacing are the same problem."""
    return " ".join(question.split())


def numeric_example(ground_truth: dict[str, Any], steps: list[str], index: int, split: str,
                    style: str) -> TaskExample:
    """An example posing `ground_truth` in `style`, with its solution and worked steps."""
    return TaskExample(SOURCE, make_messages(ground_truth, style), ground_truth, index, split,
                       {"solution": ground_truth["answer"], "steps": list(steps)})


def examples_from_problems(problems: list[WordProblem], split: str, style: str
                           ) -> list[TaskExample]:
    """Generated problems as examples of `split`, indexed 0.. in order."""
    return [
        numeric_example({"question": p.question, "answer": str(p.answer),
                         "num_steps": p.num_steps}, list(p.steps), i, split, style)
        for i, p in enumerate(problems)
    ]


def row_problem(row: Any) -> tuple[dict[str, Any], list[str]]:
    """(ground truth, worked steps) of one `{question, answer}` row; `UserError` if malformed.

    A GSM8K answer (`"...\\n#### 72"`) gives its working lines as steps and their count as
    `num_steps`; any other answer gives no steps and `num_steps` None.
    """
    if not isinstance(row, Mapping):
        raise UserError(f"row is {type(row).__name__}, expected an object with "
                        f"{' and '.join(COLUMNS)}")
    missing = [key for key in COLUMNS if key not in row]
    if missing:
        raise UserError(f"missing {', '.join(map(repr, missing))}: expected columns "
                        f"{' and '.join(COLUMNS)}")
    answer = row["answer"]
    steps = gsm8k_solution(answer)[0] if isinstance(answer, str) else []
    truth = {"question": row["question"], "answer": answer,
             "num_steps": len(steps) if steps else None}
    return numeric_ground_truth(truth), steps


def read_question_rows(path: str | Path) -> list[Any]:
    """Rows of a `.parquet`/`.json`/`.jsonl` file, or of a folder saved by `datasets`
    (`Dataset.save_to_disk`; for a `DatasetDict`, name one split's subfolder)."""
    path = Path(path)
    if not path.is_dir():
        return read_rows(path)
    import datasets  # only folders need it; importing it is slow

    try:
        loaded = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as err:
        raise UserError(f"{path}: not a folder saved by datasets ({err})".replace("\n", " ")
                        ) from None
    if isinstance(loaded, datasets.DatasetDict):
        raise UserError(f"{path} holds the splits {', '.join(loaded)}; pass one split's "
                        f"folder, e.g. {path / next(iter(loaded))}")
    return loaded.to_list()


def convert_question_file(path: str | Path, *, n: int | None = None,
                          test_size: int | None = None, test_fraction: float | None = None,
                          style: str) -> Conversion:
    """`{question, answer}` rows as numeric QA train/test examples, in file order.

    A question seen before (up to spacing) is dropped; the first `n` kept rows (all if None)
    are split as generated data are: the first test-size rows are the test split.
    """
    return convert_rows(
        read_question_rows(path), path, parse=row_problem,
        key=lambda problem: question_key(problem[0]["question"]),
        example=lambda problem, i, split: numeric_example(*problem, i, split, style),
        n=n, test_size=test_size, test_fraction=test_fraction)
