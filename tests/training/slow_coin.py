"""Importing it (after `training.coin_task`) makes every coin verdict take `DELAY_S`: training
steps of seconds, for tests that signal a run in the middle of a step. Only the test's process
and the runs it starts with `data.task_modules=[training.coin_task,training.slow_coin]` see it."""

import time

from training.coin_task import CoinTask

DELAY_S = 0.6  # a step then outlasts the 1.2 s the test waits between its two signals
_check = CoinTask.check


def _slow_check(self, answer_text, ground_truth):
    time.sleep(DELAY_S)
    return _check(self, answer_text, ground_truth)


CoinTask.check = _slow_check
