"""`StopRequests` turns the first stop signal into a request and leaves the second its old effect;
`checkpoint_step` checkpoints and stops after a completed step; `Stopped` says where to resume.
Signals go to this process (SIGUSR1, with a handler of the test's own) or to a small child
process (the default actions, which end a process)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest

from calibrl.errors import Stopped
from calibrl.training.preemption import StopRequests, checkpoint_step, stop_agreed


@pytest.fixture
def usr1_handler():
    """A Python handler of SIGUSR1 standing for a caller's own; restored after the test."""
    calls: list[int] = []
    before = signal.signal(signal.SIGUSR1, lambda signum, frame: calls.append(signum))
    yield calls
    signal.signal(signal.SIGUSR1, before)


def test_first_signal_is_a_request_second_runs_the_previous_handler(usr1_handler, capfd):
    previous = signal.getsignal(signal.SIGUSR1)
    with StopRequests([signal.SIGUSR1], repeat_after_s=0) as stop:
        assert not stop.requested
        signal.raise_signal(signal.SIGUSR1)
        assert stop.requested and stop.signal_name == "SIGUSR1"
        assert usr1_handler == []  # the caller's handler did not see the first one
        assert "SIGUSR1 received, stopping after the current step" in capfd.readouterr().err
        signal.raise_signal(signal.SIGUSR1)
        assert usr1_handler == [signal.SIGUSR1]  # the second one gets the old behaviour
        assert signal.getsignal(signal.SIGUSR1) is previous  # and the old handler is back
    assert signal.getsignal(signal.SIGUSR1) is previous


def test_the_same_signal_passed_on_at_once_is_not_a_second_one(usr1_handler):
    with StopRequests([signal.SIGUSR1], repeat_after_s=3600) as stop:
        signal.raise_signal(signal.SIGUSR1)
        signal.raise_signal(signal.SIGUSR1)  # e.g. torchrun forwarding what its ranks also got
        assert stop.requested and usr1_handler == []
        assert signal.getsignal(signal.SIGUSR1) == stop._handle  # still installed


@pytest.fixture
def sigint_handled():
    """SIGINT as a terminal starts Python with it: a test runner started in the background
    (`cmd &`) has it ignored, and StopRequests rightly leaves an ignored signal alone."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_handlers_are_restored_and_quiet_processes_say_nothing(usr1_handler, sigint_handled,
                                                                capfd):
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    with StopRequests(announce=False) as stop:
        assert all(signal.getsignal(s) == stop._handle for s in before)
        signal.raise_signal(signal.SIGUSR1)
    assert stop.requested and capfd.readouterr().err == ""
    assert {s: signal.getsignal(s) for s in before} == before


def test_an_ignored_signal_stays_ignored():
    before = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        with StopRequests([signal.SIGUSR1]) as stop:
            assert signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN
            signal.raise_signal(signal.SIGUSR1)
            assert not stop.requested
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_outside_the_main_thread_nothing_is_installed(usr1_handler):
    seen = {}

    def enter():
        with StopRequests([signal.SIGUSR1]) as stop:
            seen["handler"] = signal.getsignal(signal.SIGUSR1)
            seen["requested"] = stop.requested

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert seen["handler"] is not None and seen["handler"] == signal.getsignal(signal.SIGUSR1)
    assert seen["requested"] is False


CHILD = """
import signal, sys, time
from calibrl.training.preemption import StopRequests
# The dispositions of a process started from a terminal, whatever the test runner inherited: a
# background job (`cmd &`) starts with SIGINT ignored, which StopRequests rightly leaves alone.
signal.signal(signal.SIGINT, signal.default_int_handler)
for signum in (signal.SIGTERM, signal.SIGUSR1):
    signal.signal(signum, signal.SIG_DFL)
with StopRequests(announce=False, repeat_after_s=0) as stop:
    print("ready", flush=True)
    while not stop.requested:
        time.sleep(0.01)
    print("requested", stop.signal_name, flush=True)
    if sys.argv[1] == "exit":
        sys.exit(75)
    # Wait for the second signal in short sleeps, not one blocking read: Python runs a handler
    # between bytecodes, so a signal landing just before a blocking call waits for it to return.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.01)
print("not reached", flush=True)
"""


def _child(mode: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1, signal.SIGINT])
def test_a_child_process_sees_the_request_and_dies_at_the_second_signal(signum):
    proc = _child("wait")
    try:
        proc.send_signal(signum)
        assert proc.stdout.readline().split() == ["requested", signum.name]
        proc.send_signal(signum)
        out = proc.stdout.read()
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert "not reached" not in out
    # SIGTERM, SIGUSR1: the default action ends the process; SIGINT: KeyboardInterrupt, after
    # which Python ends itself by SIGINT too (so a shell sees 130).
    assert ("KeyboardInterrupt" in proc.stderr.read()) == (signum == signal.SIGINT)
    assert code == -signum


def test_a_child_process_stops_on_its_own_after_one_signal():
    proc = _child("exit")
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().split() == ["requested", "SIGTERM"]
    assert proc.wait(timeout=60) == 75


ONE = SimpleNamespace(num_processes=1, is_main_process=True)


def _end_step(requested: bool, *, due: bool, last: bool) -> list[str]:
    saves: list[str] = []
    stop = StopRequests()
    stop.received = signal.SIGTERM if requested else None
    try:
        checkpoint_step(stop, ONE, step=7, due=due, last=last, save=lambda: saves.append("s"))
    except Stopped as err:
        saves.append(str(err))
    return saves


def test_checkpoint_step_saves_once_and_stops_only_before_the_last_step():
    assert _end_step(False, due=False, last=False) == []
    assert _end_step(False, due=True, last=False) == ["s"]
    stopped = _end_step(True, due=False, last=False)
    assert stopped[0] == "s" and stopped[1].startswith("stopped by SIGTERM after step 7")
    assert _end_step(True, due=True, last=False)[0] == "s"
    assert len(_end_step(True, due=True, last=False)) == 2  # one save, then the stop
    assert _end_step(True, due=True, last=True) == ["s"]  # the run is complete: no stop


def test_stopped_names_the_checkpoint_and_the_exit_code():
    stop = Stopped("SIGUSR1", 12)
    assert "checkpoint checkpoint-000012 holds it" in str(stop)
    stop.folder = "/runs/a"
    assert str(stop) == ("stopped by SIGUSR1 after step 12; checkpoint /runs/a/checkpoint-000012 "
                         "holds it: continue with --resume (exit code 75)")
    assert not isinstance(stop, Exception) and stop.exit_code == 75


def test_one_process_agrees_with_itself():
    assert stop_agreed(ONE, True) is True and stop_agreed(ONE, False) is False


def _replacing_run(tmp_path):
    """A folder holding a run, opened to be replaced (`--overwrite`): the new run is staged."""
    from calibrl.training.run_setup import open_checkpointed_run

    (tmp_path / "run").mkdir()
    (tmp_path / "run/config.yaml").write_text("old\n")
    run, _ = open_checkpointed_run(tmp_path / "run", resume=None, overwrite=True,
                                   markers=("config.yaml",))
    assert run.staged
    run.work.mkdir()
    (run.work / "config.yaml").write_text("new\n")
    (run.work / "checkpoint-000003").mkdir()
    return run


def test_a_stopped_replacing_run_takes_the_old_ones_place(tmp_path):
    from calibrl.training.run_setup import closing_run

    run = _replacing_run(tmp_path)
    with pytest.raises(Stopped) as caught:
        with closing_run(run):
            raise Stopped("SIGTERM", 3)
    assert (tmp_path / "run/config.yaml").read_text() == "new\n"
    assert (tmp_path / "run/checkpoint-000003").is_dir()  # where --resume looks
    assert f"checkpoint {tmp_path / 'run'}/checkpoint-000003 holds it" in str(caught.value)
    assert run.lock is None and not run.work.exists()


def test_a_failed_replacing_run_leaves_the_old_one(tmp_path):
    from calibrl.training.run_setup import closing_run

    run = _replacing_run(tmp_path)
    with pytest.raises(OSError):
        with closing_run(run):
            raise OSError(28, "No space left on device")
    assert (tmp_path / "run/config.yaml").read_text() == "old\n"
    assert run.lock is None and not run.work.exists()
