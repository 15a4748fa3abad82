"""A write that fails for a reason the user can fix (full disk, quota, read-only) becomes one
`OSError` naming the destination, whatever shape it came in (a bare OSError, torch.save's
RuntimeError, safetensors' error); the atomic writers leave no partial file behind and the old
version in place. On a real small tmpfs where the tests may mount one, else simulated."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import calibrl.utils.write_errors as write_errors
from calibrl.training.metrics_log import MetricsLogger
from calibrl.utils.atomic import atomic_dir, atomic_write_text
from calibrl.utils.write_errors import probe_write, write_error
from training.small_disk import fill, make_read_only, small_disk

TORCH_FULL = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
RUST_FULL = Exception("Error while serializing: I/O error: No space left on device (os error 28)")


def _named(err: OSError | None, code: int, where: Path) -> bool:
    return err is not None and err.errno == code and err.filename == str(where)


def test_each_shape_of_a_failed_write_names_the_destination(tmp_path, monkeypatch):
    dest, tmp = tmp_path / "checkpoint-000020", tmp_path / ".tmp-checkpoint-000020.1"
    tmp.mkdir()
    full = OSError(errno.ENOSPC, "No space left on device")
    assert _named(write_error(full, dest), errno.ENOSPC, dest)
    quota = OSError(errno.EDQUOT, "Disk quota exceeded", str(tmp / "model/model.safetensors"))
    assert _named(write_error(quota, dest, tmp), errno.EDQUOT, dest)
    assert _named(write_error(RUST_FULL, dest, tmp), errno.ENOSPC, dest)
    monkeypatch.setattr(write_errors, "probe_write", lambda folder: errno.ENOSPC)
    assert _named(write_error(TORCH_FULL, dest, tmp), errno.ENOSPC, dest)
    assert str(write_error(TORCH_FULL, dest, tmp)).endswith(
        f"No space left on device: '{dest}'")


def test_other_errors_are_left_alone(tmp_path):
    dest, tmp = tmp_path / "out", tmp_path / ".tmp-out.1"
    tmp.mkdir()
    elsewhere = OSError(errno.ENOSPC, "No space left on device", "/other/file")
    assert write_error(elsewhere, dest, tmp) is None  # it already names where it failed
    assert write_error(OSError(errno.ENOENT, "No such file"), dest, tmp) is None  # a bug
    assert write_error(ValueError("bad value"), dest, tmp) is None
    assert write_error(KeyboardInterrupt(), dest, tmp) is None
    # torch's short write on a disk with room: not a full disk, so torch's own error stays.
    assert probe_write(tmp) is None and write_error(TORCH_FULL, dest, tmp) is None
    assert list(tmp.iterdir()) == []  # the probe cleaned up


def _no_temporaries(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.startswith((".tmp-", ".old-"))]


def _write_over_old(final: Path, write) -> OSError:
    """Replace `final` (holding "old") through `atomic_dir`, `write(tmp)` failing."""
    with pytest.raises(OSError) as caught:
        with atomic_dir(final) as tmp:
            write(tmp)
    assert (final / "old").read_text() == "old"
    _no_temporaries(final.parent)
    return caught.value


@pytest.mark.parametrize("writer", ["torch.save", "safetensors"])
def test_a_full_disk_stops_an_atomic_write_in_one_named_error(tmp_path, monkeypatch, writer):
    tensors = {"w": torch.zeros(1 << 18)}  # 1 MiB
    save = ((lambda tmp: torch.save(tensors, tmp / "state.pt")) if writer == "torch.save"
            else (lambda tmp: save_file(tensors, str(tmp / "model.safetensors"))))
    with small_disk(tmp_path / "disk", 256) as disk:
        if disk is None:  # no tmpfs here: the writer fails as it does on a full disk
            def save(tmp):
                (tmp / "part").write_bytes(b"x")
                raise TORCH_FULL if writer == "torch.save" else RUST_FULL
            monkeypatch.setattr(write_errors, "probe_write", lambda folder: errno.ENOSPC)
            disk = tmp_path / "disk"
        final = disk / "checkpoint-000002"
        final.mkdir()
        (final / "old").write_text("old")
        err = _write_over_old(final, save)
        assert _named(err, errno.ENOSPC, final.absolute())
        assert "No space left on device" in str(err) and err.__cause__ is not None


def test_a_read_only_disk_names_the_destination(tmp_path):
    with small_disk(tmp_path / "disk", 256) as disk:
        if disk is None:
            pytest.skip("cannot mount a tmpfs here; the translation is tested without one above")
        (disk / "run").mkdir()
        make_read_only(disk)
        with pytest.raises(OSError) as caught:
            with atomic_dir(disk / "run" / "checkpoint-000001"):
                pass
        assert _named(caught.value, errno.EROFS, disk / "run" / "checkpoint-000001")
        with pytest.raises(OSError) as caught:
            atomic_write_text(disk / "run" / "config.yaml", "seed: 0\n")
        assert _named(caught.value, errno.EROFS, disk / "run" / "config.yaml"), caught.value.filename


class _FullFile:
    """A log file on a full disk: every write fails as the kernel's does (no file name)."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    flush = close = lambda self: None


def test_a_metrics_row_that_does_not_fit_names_the_log(tmp_path):
    logger = MetricsLogger(tmp_path, tensorboard=False)
    logger.log(1, {"loss": 1.0})
    real, logger._metrics = logger._metrics, _FullFile()
    with pytest.raises(OSError) as caught:
        logger.log(2, {"loss": 0.5})
    assert _named(caught.value, errno.ENOSPC, tmp_path / "metrics.jsonl")
    logger._metrics = real
    logger.close()


def test_a_full_disk_under_the_metrics_log(tmp_path):
    with small_disk(tmp_path / "disk", 64) as disk:
        if disk is None:
            pytest.skip("cannot mount a tmpfs here; simulated in the test above")
        logger = MetricsLogger(disk, tensorboard=False)
        fill(disk)
        with pytest.raises(OSError) as caught:
            logger.log(1, {"text": "x" * 10000})
        assert _named(caught.value, errno.ENOSPC, disk / "metrics.jsonl")
        (disk / "filler").unlink()
        logger.close()
