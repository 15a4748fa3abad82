"""`calibrl` entry point.

Each command group lives in its own module and is added here; commands only parse arguments and
call library functions. `UserError` anywhere becomes one line on stderr and exit code 2, and so
does a file-system error the user can fix (a full disk, a read-only or file-blocked output path)
wherever a writer meets it. A run stopped by a signal after its checkpoint exits with
`Stopped.exit_code` (75).
"""

from __future__ import annotations

import functools
import os
import sys

import typer

from calibrl.errors import Stopped, UserError
from calibrl.utils.files import describe_os_error

app = typer.Typer(
    name="calibrl",
    help="RL for language models that are right and know when they are right.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # help text as written: "calibrl[vllm]" is no markup
)


@functools.cache
def _register() -> None:
    # Once per process: typer appends on every registration, so a second call would build a
    # second copy of the command tree (and every later in-process `main` call a slower one).
    # Imported here so `calibrl --help` stays fast and a broken optional part names itself.
    from calibrl.cli import (
        calibrate_cmd,
        data_cmd,
        data_facts_cmd,
        data_qa_cmd,
        demo_cmd,
        eval_cmd,
        model_cmd,
        probe_cmd,
        sft_cmd,
        train_cmd,
    )

    data_cmd.app.command("numeric-qa")(data_qa_cmd.numeric_qa)
    data_cmd.app.command("world-facts")(data_facts_cmd.world_facts)
    app.add_typer(data_cmd.app, name="data")
    app.add_typer(model_cmd.app, name="model")
    app.command("demo")(demo_cmd.demo)
    app.command("sft")(sft_cmd.sft)
    app.command("calibrate")(calibrate_cmd.calibrate)
    app.command("train")(train_cmd.train)
    app.command("eval")(eval_cmd.evaluate)
    app.command("compare")(eval_cmd.compare)
    app.command("probe")(probe_cmd.probe)


def _quiet_libraries() -> None:
    # Loading a small model prints several progress bars per command; calibrl shows its own.
    # transformers reads this when first imported, so setting it here costs no import.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; bad input exits with code 2 and a single line."""
    _register()
    _quiet_libraries()
    try:
        code = app(args=argv, standalone_mode=False)
        if code == 130:  # typer returns (not raises) Ctrl-C's exit code without standalone mode
            typer.echo("aborted", err=True)
            sys.exit(130)
    except UserError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)
    except Stopped as stop:  # a signal stopped a run after a checkpoint; one process says so
        if not stop.quiet:
            typer.echo(f"calibrl: {stop}", err=True)
        sys.exit(stop.exit_code)
    except OSError as err:
        message = describe_os_error(err)
        if message is None:
            raise  # not the user's to fix: keep the traceback
        typer.echo(f"error: {message}", err=True)
        sys.exit(2)
    except typer.Exit as ex:
        sys.exit(ex.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except typer.TyperException as err:  # usage errors (typer's own click) carry exit code 2
        show = getattr(err, "show", None)
        if show is not None:
            show()
        else:
            typer.echo(f"error: {err}", err=True)
        sys.exit(getattr(err, "exit_code", 2))


if __name__ == "__main__":
    main()
