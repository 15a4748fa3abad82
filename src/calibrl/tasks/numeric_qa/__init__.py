"""Numeric QA: a question answered by one number, verified by exact value; a generator of
multi-step arithmetic word problems; and conversion of `{question, answer}` files (GSM8K too).

Everything outside this package reaches it through the task registry
(`calibrl.tasks.get_task("numeric_qa")`, which registers `NUMERIC_QA`), never by importing it.
The data-set functions are in `calibrl.tasks.numeric_qa.data` (not imported here: they need
pyarrow, scoring does not).
"""

from calibrl.tasks.numeric_qa.numbers import format_number, parse_answer, parse_truth
from calibrl.tasks.numeric_qa.task import NumericQATask

NUMERIC_QA = NumericQATask()

__all__ = ["NUMERIC_QA", "NumericQATask", "format_number", "parse_answer", "parse_truth"]
