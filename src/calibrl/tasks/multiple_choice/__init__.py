"""Multiple choice: a question with lettered choices (GPQA, CommonsenseQA, MMLU), answered by
the correct choice's letter or text; conversion of CommonsenseQA, GPQA and `{question, choices,
answer}` rows with the choices shuffled by a seed.

Everything outside this package reaches it through the task registry
(`calibrl.tasks.get_task("multiple_choice")`, which registers `MULTIPLE_CHOICE`), never by
importing it. The data-set functions are in `calibrl.tasks.multiple_choice.data` (not imported
here: they need pyarrow, scoring does not).
"""

from calibrl.tasks.multiple_choice.choices import parse_choice, shuffle_choices, shuffled_order
from calibrl.tasks.multiple_choice.task import MultipleChoiceTask

MULTIPLE_CHOICE = MultipleChoiceTask()

__all__ = ["MULTIPLE_CHOICE", "MultipleChoiceTask", "parse_choice", "shuffle_choices",
           "shuffled_order"]
