"""A task whose scorer raises, hangs or returns NaN costs verl's and TRL's reward functions one
failure score per sample and one warning per task, called from the main thread or a worker
thread (verl scores in an executor, where SIGALRM cannot reach); normal tasks score as before,
also from many threads at once; hung calls hold a bounded number of threads."""

import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from calibrl.rewards import guard, trl_adapter, verl_adapter
from calibrl.tasks import Task, register_task
from calibrl.tasks.countdown import COUNTDOWN, compute_score

GT = {"target": 12, "numbers": [3, 4]}
LIMIT_S = 0.3
SLACK_S = 3.0  # a loaded 2-core machine; a hung call without the guard never returns
_names = itertools.count()


class _BadTask(Task):
    """Scores like the Coin task's caller expects, except that `score` misbehaves."""

    def __init__(self, behaviour: str) -> None:
        self.name = f"test_guard_{behaviour}_{next(_names)}"
        self.behaviour = behaviour
        self.release = threading.Event()

    def make_prompt(self, ground_truth, style=None):
        return COUNTDOWN.make_prompt(ground_truth, style)

    def check(self, answer_text, ground_truth):
        return True

    def score(self, solution_str, ground_truth):
        if self.behaviour == "raises":
            raise RuntimeError("scorer bug")
        if self.behaviour == "hangs":
            self.release.wait()
        if self.behaviour == "nan":
            return float("nan")
        return 1.0


@pytest.fixture
def make_task():
    made = []

    def make(behaviour: str) -> _BadTask:
        made.append(register_task(_BadTask(behaviour)))
        return made[-1]

    yield make
    for task in made:  # let abandoned scorers return, so no test leaves threads behind
        task.release.set()


def _verl(task: Task, n: int) -> list[float]:
    out = []
    for _ in range(n):
        result = verl_adapter.compute_score(task.name, "<answer>1</answer>", GT,
                                            score_timeout_s=LIMIT_S)
        assert result["acc"] == 0.0
        out.append(result["score"])
    return out


def _trl(task: Task, n: int) -> list[float]:
    reward = trl_adapter.make_trl_reward(task.name, timeout_s=LIMIT_S)
    return reward(["<answer>1</answer>"] * n, target=[12] * n, nums=[[3, 4]] * n)


def _in_worker_thread(fn, *args):
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(threading.current_thread).result() is not threading.main_thread()
        return pool.submit(fn, *args).result(timeout=60)


def _scorer_threads() -> int:
    return sum(t.name == "calibrl-scorer" for t in threading.enumerate())


def _warnings(caplog, task: Task) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and repr(task.name) in r.getMessage()]


@pytest.mark.parametrize("thread", ["main", "worker"])
@pytest.mark.parametrize("adapter", [_verl, _trl], ids=["verl", "trl"])
@pytest.mark.parametrize("behaviour", ["raises", "hangs", "nan"])
def test_a_failing_scorer_gives_the_failure_score_within_the_limit_and_warns_once(
        make_task, caplog, behaviour, adapter, thread):
    task = make_task(behaviour)
    n = 3
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="calibrl.rewards"):
        scores = adapter(task, n) if thread == "main" else _in_worker_thread(adapter, task, n)
    elapsed = time.monotonic() - start
    assert scores == [0.0] * n
    assert elapsed < n * LIMIT_S + SLACK_S
    if behaviour == "hangs":
        assert elapsed >= n * LIMIT_S * 0.9  # each sample waited its limit, no longer
    (message,) = _warnings(caplog, task)
    kind = {"raises": "RuntimeError: scorer bug", "hangs": f"ran past {LIMIT_S:g}s",
            "nan": "returned nan"}[behaviour]
    assert kind in message


@pytest.mark.parametrize("thread", ["main", "worker"])
def test_normal_tasks_score_as_before_from_any_thread(thread):
    texts = ["<think>3*4=12</think><answer>3*4</answer>", "<answer>3+4</answer>", "nothing"]

    def both():
        verl = [verl_adapter.compute_score("countdown", t, GT) for t in texts]
        trl = trl_adapter.countdown_reward(texts, target=[12] * 3, nums=[[3, 4]] * 3)
        return verl, trl

    verl, trl = both() if thread == "main" else _in_worker_thread(both)
    assert verl == [{"score": 1.0, "acc": 1.0}, {"score": 0.1, "acc": 0.0},
                    {"score": 0.0, "acc": 0.0}]
    assert trl == [1.0, 0.1, 0.0] == [compute_score(t, GT) for t in texts]


def test_many_threads_score_at_once():
    # verl's reward loop calls from many executor threads: each call gets its own result.
    cases = [(f"<answer>3{op}4</answer>", 1.0 if op == "*" else 0.1) for op in "*+-"] * 40
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda c: verl_adapter.compute_score("countdown", c[0], GT)["score"],
                            cases))
    assert got == [expected for _, expected in cases]


def test_hung_calls_hold_a_bounded_number_of_threads(make_task, caplog, monkeypatch):
    monkeypatch.setattr(guard, "MAX_ABANDONED", 2)
    task = make_task("hangs")
    with caplog.at_level(logging.WARNING, logger="calibrl.rewards"):
        assert _verl(task, 2) == [0.0, 0.0]  # two calls wait their limit and are abandoned
        threads = _scorer_threads()
        start = time.monotonic()
        assert _verl(task, 5) == [0.0] * 5  # not started: no waiting, no new thread
        assert time.monotonic() - start < LIMIT_S
    assert _scorer_threads() <= threads
    assert guard.abandoned_calls(task.name) == 2
    messages = _warnings(caplog, task)
    assert len(messages) == 2 and "still running past their limit" in messages[1]

    task.release.set()  # the hung calls return late: their threads come back
    deadline = time.monotonic() + 10
    while guard.abandoned_calls(task.name) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert guard.abandoned_calls(task.name) == 0
    assert verl_adapter.compute_score(task.name, "x", GT, score_timeout_s=LIMIT_S) == {
        "score": 1.0, "acc": 1.0}


def test_no_limit_scores_in_the_callers_thread_and_still_catches(make_task, caplog):
    task = make_task("raises")
    with caplog.at_level(logging.WARNING, logger="calibrl.rewards"):
        assert verl_adapter.compute_score(task.name, "x", GT, score_timeout_s=None) == {
            "score": 0.0, "acc": 0.0}
        reward = trl_adapter.make_trl_reward(task.name, timeout_s=None)
        assert reward(["x", "y"], target=[12, 12], nums=[[3, 4]] * 2) == [0.0, 0.0]
    assert len(_warnings(caplog, task)) == 1
    seen = []
    caller = threading.current_thread()
    guard.call_limited("inline", lambda: seen.append(threading.current_thread()), timeout_s=None)
    assert seen == [caller]


def test_the_verl_limit_is_a_reward_kwarg(make_task):
    # verl merges `reward.custom_reward_function.reward_kwargs` into every call.
    task = make_task("hangs")
    start = time.monotonic()
    assert verl_adapter.compute_score(data_source=task.name, solution_str="x", ground_truth=GT,
                                      extra_info=None, **{"score_timeout_s": 0.1})["score"] == 0.0
    assert time.monotonic() - start < 0.1 + SLACK_S
