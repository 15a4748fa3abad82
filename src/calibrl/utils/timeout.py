"""A wall-clock limit for one Python-level call (used per reward row and per verification).

Uses SIGALRM with an interval timer, which interrupts pure-Python work between bytecodes (the
reward functions are pure Python, and calibrl's own are bounded by construction anyway). Signals
only exist in the main thread on POSIX; elsewhere the call runs unbounded and `time_limit` says so
through `enforced=False`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator


class CallTimeout(Exception):
    """The call ran past its limit."""


def can_enforce() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[bool]:
    """Raise `CallTimeout` inside the block after `seconds`; yields whether the limit is enforced.

    Nests: a limit already running outside (an outer `time_limit`, or pytest-timeout's alarm) is
    put back afterwards with the time it has left, so an inner limit never cancels it.
    """
    if not seconds or seconds <= 0 or not can_enforce():
        yield False
        return

    def _raise(signum, frame):
        raise CallTimeout(f"exceeded {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, _raise)
    outer_left, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left > 0:  # due now if it ran out meanwhile (0 would cancel it)
            left = max(outer_left - (time.monotonic() - start), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)
