"""Every shell block of README.md and docs/*.md runs, in order, as a reader would type it (slow).

How (issue 43: a new user copying the docs met a missing file, a wrong config path, an unknown
key and an unknown option in turn):

- The blocks are read with pytest-codeblocks (`docs/blocks.py`). All blocks of one doc become
  one bash script, run with `set -eo pipefail`, so variables carry from block to block and the
  first failing command fails the test, named by its doc and line.
- They run in a scratch copy of the checkout (its files as git lists them), with the venv's
  `calibrl` on PATH through `small_calibrl.py`: every calibrl command runs its real code at the
  documented small settings there (a step or two, a few rows; `SMALL` and `DATA_CAPS`), and
  `accelerate launch` / `torchrun` start it the same way. The doc's text is not changed.
- Each page starts from a fresh copy, as a reader who opens it on a fresh clone; a page that
  goes on from another's results (`AFTER`: docs/distributed.md trains from the models
  docs/usage.md's pipeline wrote) starts from a copy of that page's finished one.
- A block marked `<!--pytest.mark.skip(reason="...")-->` (a GPU, the network, a download, a
  run of many minutes) is not run but checked: in a subshell whose PATH holds only the shims,
  each calibrl command is parsed and its settings loaded (`--print-config`), `make TARGET` is
  checked with `make -n`, a script named by path must exist, and nothing else runs.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docs.blocks import ROOT, doc_paths, name, shell_blocks

pytestmark = pytest.mark.slow

SMALL_CALIBRL = Path(__file__).with_name("small_calibrl.py")
# page -> the page whose finished copy it starts from (run before it)
AFTER = {ROOT / "docs/distributed.md": ROOT / "docs/usage.md"}
# pages with shell blocks only: a page of prose and Python has nothing to run here
DOCS = sorted((d for d in doc_paths() if shell_blocks(d)), key=lambda d: d in AFTER)
TIMEOUT_S = 1400  # a doc; under its pytest timeout below (a busy machine is slow)
# Shims: what each name does when a block runs (real) and when it is only checked (dry). make
# and pip would install into the venv the tests run in: a block that uses them must be marked.
SHIMS = {"calibrl": "run", "accelerate": "launch", "torchrun": "launch", "python": "exec",
         "python3": "exec", "make": "refuse", "pip": "refuse", "srun": "exec"}

# Skips, in a dry block, a command named by a path (a script of the checkout, which would run):
# calibrl and python of the venv go to their shims.
DRY_PRELUDE = r'''
_docs_path_command() {
  local words word
  read -ra words <<< "$BASH_COMMAND"
  for word in "${words[@]}"; do
    [[ $word =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] && continue
    if [[ $word == */* && $word != .venv/bin/calibrl && $word != .venv/bin/python ]]; then
      [[ -e $word ]] || echo "docs test: FAILED (dry): no such file: $word" >> "$DOCS_DRY_ERRORS"
      echo "docs test: not run (dry): $BASH_COMMAND" >&2
      return 1
    fi
    return 0
  done
}
command_not_found_handle() { "$DOCS_PY" "$DOCS_SMALL" dry "$@"; }
'''


def _copy_checkout(dest: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        source = ROOT / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)


def _write_shims(bin_dir: Path, venv_bin: Path) -> None:
    bin_dir.mkdir(parents=True)
    py, small = shlex.quote(sys.executable), shlex.quote(str(SMALL_CALIBRL))
    bash = shutil.which("bash")  # by path: a dry block's PATH holds only these shims
    for shim, real in SHIMS.items():
        if real == "run":
            run = f'exec {py} {small} run "$@"'
        elif real == "launch":
            run = f'exec {py} {small} launch {shim} "$@"'
        elif real == "refuse":
            run = (f'echo "docs test: {shim} would change the venv the tests run in; mark '
                   f'the block skip with a reason" >&2; exit 1')
        else:
            run = f'PATH="$DOCS_REAL_PATH" exec {shim} "$@"'
        (bin_dir / shim).write_text(
            f'#!{bash}\nif [ -n "$DOCS_DRY" ]; then exec {py} {small} dry '
            f'{shim} "$@"; fi\n{run}\n')
        (bin_dir / shim).chmod(0o755)
    venv_bin.mkdir(parents=True)
    for shim in ("calibrl", "python"):
        (venv_bin / shim).symlink_to(bin_dir / shim)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A copy of the checkout with the shims, to copy again for each page."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to copy")
    ws = tmp_path_factory.mktemp("docs") / "calibrl"
    ws.mkdir()
    _copy_checkout(ws)
    _write_shims(ws / ".docs-bin", ws / ".venv/bin")
    return ws


FINISHED: dict[Path, Path] = {}  # page -> its copy after all its blocks ran


def _workspace(doc: Path, checkout: Path) -> Path:
    start = checkout
    if doc in AFTER:
        if AFTER[doc] not in FINISHED:
            pytest.skip(f"goes on from {name(AFTER[doc])}, which did not finish")
        start = FINISHED[AFTER[doc]]
    ws = checkout.parent / doc.stem
    shutil.copytree(start, ws, symlinks=True)
    return ws


def _script(doc: Path) -> str:
    lines = ["set -eo pipefail", DRY_PRELUDE]
    for block in shell_blocks(doc):
        lines.append(f"echo '=== {block.where}' >&2")
        if block.skip_reason is None:
            lines += ["set -x", block.code, "{ set +x; } 2>/dev/null"]
        else:
            note = shlex.quote(f"not run ({block.skip_reason}); checked:")
            lines += [f"echo {note} >&2",
                      "(", "export DOCS_DRY=1 PATH=\"$PWD/.docs-bin\"", "set +eo pipefail",
                      "shopt -s extdebug", "trap _docs_path_command DEBUG",
                      block.code, ")",
                      f'if [ -s "$DOCS_DRY_ERRORS" ]; then echo "{block.where}: checked '
                      'and failed:" >&2; cat "$DOCS_DRY_ERRORS" >&2; exit 1; fi']
    return "\n".join(lines) + "\n"


def _run(doc: Path, workspace: Path) -> tuple[int, str]:
    """(exit code, output) of `doc`'s shell blocks run in order in `workspace`."""
    script = workspace / f".docs-{doc.stem}.sh"
    script.write_text(_script(doc))
    syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    if syntax.returncode:
        return syntax.returncode, f"{name(doc)}: not valid bash: {syntax.stderr}"
    real_path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": f"{workspace / '.docs-bin'}{os.pathsep}{real_path}",
           "DOCS_REAL_PATH": real_path, "DOCS_PY": sys.executable,
           "DOCS_SMALL": str(SMALL_CALIBRL), "DOCS_DRY_ERRORS": str(script) + ".dry-errors",
           "HF_HUB_OFFLINE": "1", "PS4": "+ ",
           # startup dominates each small command; one thread each keeps a busy machine usable
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env.pop("DOCS_DRY", None)
    log_path = workspace / f".docs-{doc.stem}.log"  # written as it runs: `tail -f` shows it
    with log_path.open("w") as log:
        done = subprocess.run(["bash", str(script)], cwd=workspace, env=env, stdout=log,
                              stderr=subprocess.STDOUT, timeout=TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    return done.returncode, log_path.read_text()


@pytest.mark.timeout(TIMEOUT_S + 100)
@pytest.mark.parametrize("doc", DOCS, ids=name)
def test_doc_shell_blocks_run_in_order(doc, checkout):
    ws = _workspace(doc, checkout)
    code, output = _run(doc, ws)
    assert code == 0, f"{name(doc)} failed; its last output:\n{output[-6000:]}"
    FINISHED[doc] = ws


@pytest.mark.parametrize("block, expected", [
    ("calibrl eval --model m --data d.parquet --out o --no-such-option 1", "no-such-option"),
    ("calibrl eval --config configs/no-such.yaml", "no-such.yaml"),
    ("calibrl train --config configs/cpu_tiny.yaml optim.lrr=1", "optim.lrr"),
    ("calibrl data countdown --n 10 --out d --no-such-option", "no-such-option"),
    ("make no-such-target", "no-such-target"),
    ("scripts/no-such-script.sh", "no-such-script.sh"),
])
def test_a_skipped_block_still_fails_on_a_renamed_option_key_or_file(block, expected,
                                                                     checkout):
    page = checkout / "docs-check" / "page.md"
    page.parent.mkdir(exist_ok=True)
    page.write_text(f'<!--pytest.mark.skip(reason="checked, not run")-->\n```bash\n{block}\n```\n')
    code, output = _run(page, checkout)
    assert code != 0 and expected in output.split("checked and failed:")[-1], output
