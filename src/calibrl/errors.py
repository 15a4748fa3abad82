"""The exception types the command line turns into one line instead of a traceback, and the
wording of the errors every command shares (a missing file, an empty input, an output folder
that would be replaced).

Anything a user can fix (a config key, a data row, a path) raises `UserError`; the command line
turns it into one readable line on stderr and exit code 2, never a traceback. A run stopped on
request (a scheduler's or a user's signal) after checkpointing raises `Stopped`, which the command
line reports in one line with exit code `Stopped.exit_code`.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input the user can fix. The message must stand alone on one line."""


# The wording of the inputs every command can get wrong, kept here, below every part, so that
# all commands say it the same way.

def missing_file(path: object) -> UserError:
    """An input file that is not there."""
    return UserError(f"{path}: no such file")


def no_rows(path: object, what: str = "rows") -> UserError:
    """An input that holds nothing to work on (rows of data, traces)."""
    return UserError(f"{path} holds no {what}")


def already_holds(path: object, what: str, them: bool = False) -> UserError:
    """An output folder that holds what a command would replace, without --overwrite."""
    return UserError(f"{path} already holds {what}; pass --overwrite to replace "
                     f"{'them' if them else 'it'}")


class Stopped(BaseException):
    """A run stopped by a signal after checkpointing its last completed step.

    A `BaseException`, like `KeyboardInterrupt`: a stop request must not be swallowed by an
    `except Exception` between the training loop and the command line.
    """

    # sysexits.h EX_TEMPFAIL, "a temporary failure; the user is invited to retry": distinct from
    # 0 (done), 1 (a crash), 2 (bad input) and 128+N (killed by signal N before any checkpoint).
    exit_code = 75

    def __init__(self, signal_name: str, step: int, *, quiet: bool = False) -> None:
        super().__init__(signal_name, step)
        self.signal_name, self.step, self.quiet = signal_name, step, quiet
        self.folder: str | None = None  # the run folder, once the run's owner knows it
        self.advice = "continue with --resume"  # a command with no --resume says what instead

    def __str__(self) -> str:
        name = f"checkpoint-{self.step:06d}"
        where = f"{self.folder}/{name}" if self.folder else name
        return (f"stopped by {self.signal_name} after step {self.step}; checkpoint {where} "
                f"holds it: {self.advice} (exit code {self.exit_code})")
