"""Where a `train` or `sft` run writes, and the checkpoint it continues from.

Both commands share the rules of `calibrl.utils.run_dir` (one process per folder; a folder that
holds a run is continued only with resume, replaced only with overwrite) and of
`calibrl.training.checkpoint` (resume from the newest intact checkpoint). A run continued from
step s also drops what the killed run wrote after s: checkpoints of later steps are set aside
(else `keep_last` would prune the new ones first) and the logs are cut back by their writers.
`closing_run` releases the folder when the run ends, whichever way it ends.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path

from calibrl.errors import Stopped, UserError
from calibrl.training.checkpoint import Checkpoint, find_checkpoint, list_checkpoints, set_aside
from calibrl.utils.run_dir import RunDir, open_run_dir

_DEFAULT_NAME = re.compile(r"^(?P<mode>.+)-\d{8}-\d{6}$")  # `run_directory`'s names


def holds_run(markers: Sequence[str]) -> Callable[[Path], bool]:
    """A test for "this folder holds a run": any of `markers` or a checkpoint is there."""
    def test(path: Path) -> bool:
        if not path.is_dir():
            return False
        return (any((path / m).exists() for m in markers)
                or any(p.name.startswith("checkpoint-") for p in path.iterdir()))
    return test


def default_run_dir(output_dir: Path, mode: str, run_name: str | None, resume: str | None
                    ) -> Path:
    """`output_dir/run_name`; without a name a new `MODE-DATE-TIME` folder, or, when resuming
    ('auto'), the one unfinished run of this mode there (refused when there is none or several)."""
    if run_name:
        return output_dir / run_name
    if resume != "auto":
        return output_dir / f"{mode}-{datetime.now():%Y%m%d-%H%M%S}"
    candidates = sorted(
        p for p in (output_dir.iterdir() if output_dir.is_dir() else [])
        if (m := _DEFAULT_NAME.match(p.name)) and m["mode"] == mode and p.is_dir()
        and list_checkpoints(p) and not (p / "final-model").exists())
    if len(candidates) == 1:
        print(f"resuming {candidates[0]}")
        return candidates[0]
    found = ", ".join(p.name for p in candidates) or "none"
    raise UserError(f"--resume without logging.run_name: it continues the one unfinished {mode} "
                    f"run in {output_dir}, found {found}; name the run with logging.run_name=NAME")


def open_checkpointed_run(final: Path, *, resume: str | None, overwrite: bool,
                          markers: Sequence[str], main: bool = True,
                          keep: Callable[[str], bool] | None = None
                          ) -> tuple[RunDir, Checkpoint | None]:
    """Take the run folder and find the checkpoint to continue from (None: a fresh start).

    `resume`: None, 'auto' (the run already in `final`, which must have an intact checkpoint) or
    a checkpoint path (continued in `final`, new or not).
    """
    run = open_run_dir(final, holds_run=holds_run(markers), resume=resume is not None,
                       overwrite=overwrite, must_exist=resume == "auto", main=main, keep=keep)
    try:
        ckpt = None
        if resume is not None:
            ckpt = find_checkpoint(resume, run.work, main=main)
            if ckpt is None:
                raise UserError(f"nothing to resume: {run.final} has no intact checkpoint; pass "
                                "--overwrite to start afresh")
            if main:
                for later in list_checkpoints(run.work):
                    if later.step > ckpt.step:
                        set_aside(later, f"after step {ckpt.step}, which the run continues from",
                                  suffix="superseded")
    except BaseException:
        run.close()
        raise
    return run, ckpt


@contextlib.contextmanager
def closing_run(run: RunDir, *, main: bool = True) -> Iterator[RunDir]:
    """Release `run` after the block. A run that fails leaves the old run as it was (a replacing
    run's staging folder goes); a run stopped by a signal keeps its checkpoint where `--resume`
    looks: a replacing (`--overwrite`) run is swapped in, since the user asked for it to replace
    the old one and only it holds the steps done."""
    try:
        yield run
    except Stopped as stop:
        if main:
            run.commit()
        stop.folder = str(run.final)
        run.close()
        raise
    except BaseException:
        run.close(failed=True)
        raise
    run.close()
