"""Stopping a run cleanly when a scheduler (or a user) asks, so no completed step is lost.

Clusters stop jobs by signal and kill them a grace period later: Slurm sends SIGTERM (or, with
`--signal`, SIGUSR1 some time before the time limit) and SIGKILL `KillWait` seconds after it;
Kubernetes sends SIGTERM and SIGKILL after `terminationGracePeriodSeconds`; Ctrl-C is SIGINT.
While `StopRequests` is installed, the first of these signals only records the request. The
training loops (`calibrl train`, `calibrl sft`) finish the step in flight, agree on every process
that they stop after that same step (`stop_agreed`: one all-reduce per step), checkpoint it and
raise `calibrl.errors.Stopped`, which the command line reports in one line with exit code 75.
`--resume` then continues from that step as from any checkpoint.

A second signal gets the behaviour it had before calibrl's handler: SIGTERM and SIGUSR1 end the
process at once (exit status 128 + N), SIGINT raises `KeyboardInterrupt`. One that follows the
first within `REPEAT_AFTER_S` is the first request arriving twice, not a second one: Slurm
signals every process of a job step and a terminal every process of its foreground group, and
torchrun at once passes the signal it got on to its ranks, which got it already. A signal that
was ignored when the run started (`nohup`, a background job's SIGINT) stays ignored. Handlers go
in only from the main thread (Python allows no other) and the previous ones come back on exit,
so a library caller keeps its own.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from calibrl.errors import Stopped

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
REPEAT_AFTER_S = 1.0  # a launcher forwards within milliseconds; a person takes longer


class StopRequests:
    """A context manager that turns the first stop signal into a request the loop polls."""

    def __init__(self, signals: Iterable[int] = STOP_SIGNALS, *, announce: bool = True,
                 repeat_after_s: float = REPEAT_AFTER_S) -> None:
        """`announce`: say on stderr, as the signal arrives, that the run stops after the step
        (one process of several says it); `repeat_after_s`: how long after the first a signal
        counts as a second one."""
        self.signals = tuple(signals)
        self.announce = announce
        self.repeat_after_s = repeat_after_s
        self.received: int | None = None  # the first signal's number
        self._received_at = 0.0
        self._previous: dict[int, Callable[..., Any] | int] = {}

    @property
    def requested(self) -> bool:
        return self.received is not None

    @property
    def signal_name(self) -> str:
        """The first signal's name; for a process that got none, where the request came from."""
        if self.received is None:
            return "a signal to another process"
        return signal.Signals(self.received).name

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is not threading.main_thread():
            return self  # Python runs handlers in the main thread only; nothing to install
        for signum in self.signals:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN or previous is None:
                continue  # ignored on purpose, or a handler not set from Python: left alone
            self._previous[signum] = previous
            signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received, self._received_at = signum, time.monotonic()
            if self.announce:
                # os.write, not print: a handler may run in the middle of a print to stderr.
                os.write(2, f"\ncalibrl: {self.signal_name} received, stopping after the "
                            "current step (send it again to stop at once)\n".encode())
            return
        if time.monotonic() - self._received_at < self.repeat_after_s:
            return  # the first request passed on by a launcher
        previous = self._previous.get(signum, signal.SIG_DFL)
        self._restore()
        if callable(previous):
            previous(signum, frame)  # e.g. Python's SIGINT handler: KeyboardInterrupt
        else:
            os.kill(os.getpid(), signum)  # the default action again: the process ends now


def stop_agreed(accelerator: Any, requested: bool) -> bool:
    """Whether any process was asked to stop; every process gets the same answer, so all stop
    after the same step (a scheduler may signal one process, or the processes at different
    moments). A collective: every process calls it once per step."""
    if accelerator.num_processes == 1:
        return requested
    import torch

    flag = torch.tensor(float(requested), device=accelerator.device)
    return float(accelerator.reduce(flag, reduction="sum")) > 0


def checkpoint_step(stop: StopRequests, accelerator: Any, *, step: int, due: bool, last: bool,
                    save: Callable[[], None]) -> None:
    """End of a completed step: `save()` when a checkpoint is `due`; when a stop is agreed (not
    after the `last` step: that run is complete), also when not due, then raise `Stopped`.
    Every process calls it after every step (`save` and `stop_agreed` are collectives)."""
    if due:
        save()
    if not last and stop_agreed(accelerator, stop.requested):
        if not due:
            save()
        raise Stopped(stop.signal_name, step, quiet=not accelerator.is_main_process)
