"""Short answer: a factual question (HotpotQA, TriviaQA, SimpleQA) answered by a short phrase,
right iff it matches an accepted answer after SQuAD's normalisation; SQuAD's token F1 beside it;
and conversion of TriviaQA, HotpotQA and `{question, answers}` rows.

Everything outside this package reaches it through the task registry
(`calibrl.tasks.get_task("short_answer")`, which registers `SHORT_ANSWER`), never by importing
it. The data-set functions are in `calibrl.tasks.short_answer.data` (not imported here: they
need pyarrow, scoring does not).
"""

from calibrl.tasks.short_answer.normalize import (
    exact_match,
    max_token_f1,
    normalize_answer,
    token_f1,
)
from calibrl.tasks.short_answer.task import F1_SCORE, ShortAnswerTask

SHORT_ANSWER = ShortAnswerTask()

__all__ = ["F1_SCORE", "SHORT_ANSWER", "ShortAnswerTask", "exact_match", "max_token_f1",
           "normalize_answer", "token_f1"]
