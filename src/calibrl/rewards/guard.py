"""Scoring inside other trainers' reward loops (verl, TRL): a task's scorer that raises or hangs
costs its sample the failure score and one warning, never the peer's training step.

Why a thread and not `calibrl.utils.timeout`: SIGALRM reaches only the main thread, and verl
scores in worker threads (its reward loop runs `compute_score` in an executor). Here the scorer
runs on a thread of a small pool and the caller waits at most `timeout_s` for it, from whatever
thread it is in. The fast path costs one hand-off to an idle thread and back (tens of
microseconds), against a decode and a score per sample in the peer's loop.

A Python thread cannot be stopped from outside, so a call that runs past its limit is abandoned:
its thread goes on until the scorer returns, possibly never. A task may have at most
`MAX_ABANDONED` such calls at once; beyond that its samples get the failure score without
running the scorer (and a warning says so), so a task that hangs on every input holds a bounded
number of threads and stalls the peer for at most `MAX_ABANDONED * timeout_s`. A call that comes
back late gives its thread back to the pool.

Not bounded: a scorer stuck in C code that never releases the GIL (a huge `int ** int`, a regular
expression that backtracks for ever) stops every Python thread, the waiting caller included.
Only a separate process could cut that off, at a per-call price the fast path should not pay;
calibrl's own scorers bound their inputs so that they cannot do it.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0  # per sample; calibrl's scorers take microseconds to milliseconds
MAX_ABANDONED = 4  # calls of one task past their limit and still running
MAX_IDLE = 32  # idle threads kept for the next calls; more come and go with the peer's concurrency

_lock = threading.Lock()
_idle: list[_Worker] = []
_abandoned: dict[str, int] = {}
_warned: set[tuple[str, str]] = set()


class _Call:
    __slots__ = ("fn", "args", "key", "done", "finished", "value", "error", "abandoned")

    def __init__(self, key: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.key, self.fn, self.args = key, fn, args
        # Taken here, released by the worker: the cheapest wait with a timeout.
        self.done = threading.Lock()
        self.done.acquire()
        self.finished = self.abandoned = False
        self.value: Any = None
        self.error: BaseException | None = None


class _Worker:
    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        # Daemon: an abandoned scorer that never returns must not keep the interpreter alive.
        threading.Thread(target=self._serve, name="calibrl-scorer", daemon=True).start()

    def _serve(self) -> None:
        while True:
            call = self.inbox.get()
            try:
                value, error = call.fn(*call.args), None
            except BaseException as err:  # even SystemExit: the worker must outlive the call
                value, error = None, err
            with _lock:
                call.value, call.error, call.finished = value, error, True
                if call.abandoned:
                    _abandoned[call.key] -= 1
                keep = len(_idle) < MAX_IDLE
                if keep:
                    _idle.append(self)
            call.done.release()
            if not keep:
                return


def _forget_threads() -> None:
    # A forked child has none of the parent's threads: handing it a call would wait for ever.
    global _lock
    _lock = threading.Lock()
    _idle.clear()
    _abandoned.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads)


def warn_once(key: str, kind: str, message: str, *args: Any) -> None:
    """Log `message` as a warning the first time `key` (a task) fails in this `kind` of way:
    a peer scores thousands of samples a step, and one line per sample would bury the cause."""
    with _lock:
        if (key, kind) in _warned:
            return
        _warned.add((key, kind))
    log.warning(message + " (warned once per task)", *args)


def is_finite_score(key: str, value: float) -> bool:
    """Whether `value` is a finite number; a NaN or infinite reward would poison the peer's
    advantages, so it is a failure too (warned once per `key`)."""
    if math.isfinite(value):
        return True
    warn_once(key, "non-finite", "task %r: scoring returned %s; the sample gets the failure "
              "score", key, value)
    return False


def abandoned_calls(key: str) -> int:
    """How many of `key`'s calls ran past their limit and have not returned yet."""
    with _lock:
        return _abandoned.get(key, 0)


def call_limited(key: str, fn: Callable[..., Any], *args: Any,
                 timeout_s: float | None = DEFAULT_TIMEOUT_S) -> tuple[bool, Any]:
    """`(True, fn(*args))`, or `(False, None)` when `fn` raised, ran past `timeout_s` seconds,
    or was not started because `MAX_ABANDONED` calls of `key` are still running past theirs;
    each way of failing is logged once per `key` (`warn_once`). Callable from any thread.

    `timeout_s` None or <= 0: no limit, `fn` runs in the caller's thread (exceptions are still
    caught).
    """
    if not timeout_s or timeout_s <= 0:
        try:
            return True, fn(*args)
        except Exception as err:
            _warn_raised(key, err)
            return False, None
    with _lock:
        stuck = _abandoned.get(key, 0) >= MAX_ABANDONED
        worker = _idle.pop() if _idle and not stuck else None
    if stuck:
        warn_once(key, "skipped", "task %r: %d scorer calls are still running past their limit and "
                  "cannot be stopped; its samples get the failure score without being scored "
                  "until one returns", key, MAX_ABANDONED)
        return False, None
    call = _Call(key, fn, args)
    try:
        worker = worker or _Worker()
    except RuntimeError as err:  # the process is out of threads
        warn_once(key, "no thread", "task %r: cannot start a scoring thread (%s); the sample "
                  "gets the failure score", key, err)
        return False, None
    worker.inbox.put(call)
    finished = False
    try:
        finished = call.done.acquire(timeout=timeout_s)
    finally:  # also when the wait itself is interrupted (KeyboardInterrupt, an outer alarm)
        if not finished:
            with _lock:
                finished = call.finished
                if not finished:
                    call.abandoned = True
                    _abandoned[key] = _abandoned.get(key, 0) + 1
    if not finished:
        warn_once(key, "timeout", "task %r: scoring ran past %gs; the sample gets the failure score "
                  "and the call is abandoned (a Python thread cannot be stopped)", key, timeout_s)
        return False, None
    if call.error is not None:
        _warn_raised(key, call.error)
        return False, None
    return True, call.value


def _warn_raised(key: str, err: BaseException) -> None:
    warn_once(key, "raised", "task %r: scoring raised %s: %s; the sample gets the failure score",
              key, type(err).__name__, err)
