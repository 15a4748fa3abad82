"""Math: a competition or grade-school problem (MATH, GSM8K) answered by a final expression in
`<answer>…</answer>` (or, without an answer block, the last `\\boxed{…}`), right iff
math-verify finds it equal to the reference answer (`\\frac{1}{2}` = `0.5`, intervals, sets).

math-verify is the optional extra `calibrl[math]`, imported only when an answer is verified;
importing this package (and `calibrl.tasks`) works without it. Everything outside this package
reaches it through the task registry (`calibrl.tasks.get_task("math")`). The data-set functions
are in `calibrl.tasks.math_task.data` (not imported here: they need pyarrow, scoring does not).
"""

from calibrl.tasks.math_task.answers import extract_math_answer, last_boxed
from calibrl.tasks.math_task.task import MISSING_EXTRA, MathTask

MATH = MathTask()

__all__ = ["MATH", "MISSING_EXTRA", "MathTask", "extract_math_answer", "last_boxed"]
