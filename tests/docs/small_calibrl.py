"""The `calibrl` the docs test puts on PATH: the real command, at documented small settings.

    python small_calibrl.py run ARGS...            calibrl ARGS, scaled down (below)
    python small_calibrl.py launch NAME ARGS...    the launcher NAME (accelerate, torchrun) with
                                                   the `-m calibrl ...` it starts scaled down
    python small_calibrl.py dry NAME ARGS...       validate, run nothing (a block marked skip)

The small settings are appended to what the doc's command says (later ones win), so a command
runs its real code on a few rows for a step or two; what the doc tells a user to type is not
changed. `calibrl data` generates at most `DATA_CAPS` rows. In `dry` mode a calibrl command is
parsed by its command and, where it has settings, loaded with `--print-config`, so a renamed
option, key or config file fails; other programs are not run: `make TARGET` is checked with
`make -n`, a script named by path must exist, anything else is noted as not run. A dry failure
is also appended to the file `$DOCS_DRY_ERRORS`, which the docs test reads after the block.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

SMALL = {
    "sft": ["steps=2"],
    "calibrate": ["steps=2", "prompts=4", "batch_size=4", "answer_batch_size=2"],
    "train": ["optim.total_steps=2", "rollout.prompts_per_step=2", "eval.every_steps=1",
              "eval.max_examples=4", "checkpoint.every=1"],
    "eval": ["max_examples=6", "bootstrap=20"],
    "probe": ["limit=2", "samples=4"],
    "demo": ["sft.steps=2", "calibrate.steps=2", "calibrate.prompts=4", "calibrate.batch_size=4",
             "calibrate.answer_batch_size=2", "eval.max_examples=8", "rl.optim.total_steps=2",
             "rl.rollout.prompts_per_step=2", "probe.limit=2", "probe.samples=4"],
}
# The demo's data, by the recipe's kind (the key its data section has).
SMALL_DEMO_DATA = {
    "n_problems": ["data.n_problems=200", "data.test_size=20", "data.sft_problems=200"],
    "n_facts": ["data.n_facts=128", "data.test_size=32"],
}
DATA_CAPS = {"--n": 300, "--test-size": 30}
SETTINGS_COMMANDS = ("train", "sft", "calibrate", "eval", "probe", "demo")
DEMO_RECIPE = "configs/demo.yaml"
# The recipes `SMALL_DEMO_DATA` knows, checked by the fast docs tests.
ROOT_RECIPES = [Path(__file__).resolve().parents[2] / "configs" / name
                for name in ("demo.yaml", "demo_facts.yaml")]


def _option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _capped(args: list[str]) -> list[str]:
    out = list(args)
    for i, arg in enumerate(out):
        for name, cap in DATA_CAPS.items():
            if arg == name and i + 1 < len(out):
                out[i + 1] = str(min(int(out[i + 1]), cap))
            elif arg.startswith(name + "="):
                out[i] = f"{name}={min(int(arg.split('=', 1)[1]), cap)}"
    return out


def scaled(args: list[str]) -> list[str]:
    """`calibrl ARGS` at the small settings."""
    if not args:
        return args
    command = args[0]
    if command == "data":
        return _capped(args)
    extra = list(SMALL.get(command, []))
    if command == "demo":
        recipe = yaml.safe_load(Path(_option(args, "--config") or DEMO_RECIPE).read_text())
        # a recipe without a stage (the facts demo has no probe) takes none of its settings
        extra = [item for item in extra if item.split(".", 1)[0] in recipe]
        kinds = [key for key in SMALL_DEMO_DATA if key in (recipe.get("data") or {})]
        if not kinds:  # a whole demo would run for many minutes: say what to add instead
            raise SystemExit("docs test: no small data settings for this demo recipe; add its "
                             "kind to SMALL_DEMO_DATA in tests/docs/small_calibrl.py")
        extra += SMALL_DEMO_DATA[kinds[0]]
    return [*args, *extra]


def _calibrl_words(words: list[str]) -> list[str] | None:
    """The arguments of the calibrl command that `words` starts, or None when there is none."""
    for i, word in enumerate(words):
        if word == "calibrl" or word.endswith("/calibrl"):
            return words[i + 1:]
        if word == "-m" and i + 1 < len(words) and words[i + 1] == "calibrl":
            return words[i + 2:]
    return None


def _check_calibrl(args: list[str]) -> str | None:
    """The problem with `calibrl ARGS`, parsed and its settings loaded but nothing run."""
    import typer

    from calibrl.cli import main as cli

    if args and args[0] in SETTINGS_COMMANDS:
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                cli.main([*args, "--print-config"])
        except SystemExit as stop:
            if stop.code:
                return err.getvalue().strip() or f"exit code {stop.code}"
        return None
    cli._register()
    command, words, path = typer.main.get_command(cli.app), list(args), ["calibrl"]
    # calibrl's groups take no options of their own: a word names the subcommand
    while hasattr(command, "commands") and words and words[0] in command.commands:
        path.append(words[0])
        command = command.commands[words.pop(0)]
    if hasattr(command, "commands"):
        return f"no such command: {' '.join([*path, *words[:1]])}"
    try:
        command.make_context(" ".join(path), words)
    except Exception as err:  # click's usage errors, as a user would see them
        text = err.format_message() if hasattr(err, "format_message") else str(err)
        return f"{type(err).__name__}: {text}"
    return None


def dry(name: str, args: list[str]) -> int:
    """Validate what `name ARGS` would do without doing it; 0 when it is fine."""
    calibrl_args = args if name == "calibrl" else _calibrl_words(args)
    if calibrl_args is not None:
        problem = _check_calibrl(calibrl_args)
        what = "calibrl " + " ".join(calibrl_args)
    elif name == "make":
        make = shutil.which("make", path=os.environ.get("DOCS_REAL_PATH"))
        done = subprocess.run([make or "make", "-n", *args], capture_output=True, text=True)
        problem = done.stderr.strip() if done.returncode else None
        what = "make " + " ".join(args)
    elif name in ("python", "python3") and args and not args[0].startswith("-"):
        problem = None if Path(args[0]).is_file() else f"no such script: {args[0]}"
        what = f"{name} {args[0]}"
    else:
        print(f"docs test: not run (dry): {name} {' '.join(args)}", file=sys.stderr)
        return 0
    if problem is None:
        print(f"docs test: checked (dry): {what}", file=sys.stderr)
        return 0
    message = f"{what}\n    -> {problem}"
    print(f"docs test: FAILED (dry): {message}", file=sys.stderr)
    errors = os.environ.get("DOCS_DRY_ERRORS")
    if errors:
        with open(errors, "a", encoding="utf-8") as handle:
            handle.write(message + "\n")
    return 1


def launch(name: str, args: list[str]) -> int:
    """Run the real launcher `name` with the calibrl command it starts scaled down."""
    real = shutil.which(name, path=os.environ["DOCS_REAL_PATH"])
    if real is None:
        raise SystemExit(f"docs test: {name} not found")
    tail = _calibrl_words(args)
    if tail is not None:
        args = args[:len(args) - len(tail)] + scaled(tail)
    return subprocess.run([real, *args]).returncode


def main(argv: list[str]) -> int:
    mode, rest = argv[0], argv[1:]
    if mode == "run":
        from calibrl.cli.main import main as calibrl

        sys.argv = ["calibrl", *scaled(rest)]
        calibrl(sys.argv[1:])
        return 0
    if mode == "launch":
        return launch(rest[0], rest[1:])
    if mode == "dry":
        return dry(Path(rest[0]).name, rest[1:])
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
