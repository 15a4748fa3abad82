"""A task for training tests: correct iff a stable hash of the answer is even, so even a random
model's text gets varied rewards and its weights must move. Importing it registers the task."""

from calibrl.tasks import Task, register_task
from calibrl.tasks.countdown import COUNTDOWN


class CoinTask(Task):
    name = "test_coin"
    failure_score = 0.0

    def make_prompt(self, ground_truth, style=None):
        return COUNTDOWN.make_prompt(ground_truth, style)

    def check(self, answer_text, ground_truth):
        return sum(answer_text.encode()) % 2 == 0

    def score(self, solution_str, ground_truth):
        return float(self.verify(solution_str, ground_truth))

    def difficulty(self, ground_truth):
        return "coin"


COIN = CoinTask()
try:
    register_task(COIN)
except ValueError:  # already registered by another import path in the same process
    pass
