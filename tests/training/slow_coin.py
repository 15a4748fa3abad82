"""Importing it (after `training.coin_task`) makes the coin task's first step run as usual and
every later verdict hold for `HOLD_S`: a run that has logged its first step is then inside its
second for as long as a test needs, on however slow or busy a machine, for tests that signal a
run in the middle of a step. Only the test's process and the runs it starts with
`data.task_modules=[training.coin_task,training.slow_coin]` see it."""

import itertools
import time

from training.coin_task import CoinTask

FIRST_STEP_VERDICTS = 8  # run_settings: 4 prompts x 2 answers
HOLD_S = 120.0  # far past any signal test's wait, and still ends a run nobody stops
_check = CoinTask.check
_calls = itertools.count()


def _held_check(self, answer_text, ground_truth):
    if next(_calls) >= FIRST_STEP_VERDICTS:
        time.sleep(HOLD_S)
    return _check(self, answer_text, ground_truth)


CoinTask.check = _held_check
CoinTask.verify_timeout_s = None  # the hold is the point; a timeout would cut it to 1 s
