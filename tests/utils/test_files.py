"""The file helpers' one-line errors."""

import errno

import pytest

from calibrl.errors import UserError
from calibrl.utils.files import (
    check_output_dir,
    check_output_file,
    describe_os_error,
    read_text_file,
)


def test_read_text_file_refuses_non_utf8_in_one_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"seed: 1 # caf\xe9\n")
    with pytest.raises(UserError) as info:
        read_text_file(path, "config file")
    assert "not UTF-8" in str(info.value) and "\n" not in str(info.value)
    path.write_text("seed: 1\n", encoding="utf-8")
    assert read_text_file(path, "config file") == "seed: 1\n"
    with pytest.raises(UserError, match="missing.yaml: no such file$"):  # as every command says
        read_text_file(tmp_path / "missing.yaml", "config file")
    with pytest.raises(UserError, match="cannot read config file"):
        read_text_file(tmp_path, "config file")  # a folder


def test_check_output_dir_creates_nothing_and_refuses_files(tmp_path):
    check_output_dir(tmp_path / "a" / "b", "--out")
    assert list(tmp_path.iterdir()) == []  # the write probe is gone, nothing was created
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="exists and is not a folder"):
        check_output_dir(tmp_path / "f", "--out")
    with pytest.raises(UserError, match="is a file, not a folder"):
        check_output_dir(tmp_path / "f" / "sub", "--out")
    with pytest.raises(UserError, match="is a folder, expected a file name"):
        check_output_file(tmp_path, "--plot")


def test_describe_os_error_only_for_user_fixable_errors():
    full = OSError(errno.ENOSPC, "No space left on device", "/x/train.parquet")
    assert describe_os_error(full) == "cannot write /x/train.parquet: No space left on device"
    assert describe_os_error(OSError(errno.ENOENT, "No such file", "/x")) is None
