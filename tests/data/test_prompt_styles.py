"""Countdown prompt styles: the TinyZero wording by default, a compact one on request."""

import pytest

from calibrl.cli.main import main
from calibrl.tasks.countdown import compute_score
from calibrl.tasks.files import load_examples


def test_short_prompt_style(tmp_path):
    main(["data", "countdown", "--n", "12", "--numbers", "3..3", "--max-number", "9",
          "--test-size", "2", "--prompt-style", "short", "--out", str(tmp_path)])
    for ex in load_examples(tmp_path / "train.parquet"):
        (message,) = ex.messages
        assert message["role"] == "user" and message["content"].startswith("Numbers: ")
        for n in ex.ground_truth["numbers"]:
            assert str(n) in message["content"]
        truth = ex.ground_truth
        assert compute_score(f"<answer>{ex.extra['solution']}</answer>", truth) == 1.0


def test_default_style_is_tinyzero(tmp_path):
    main(["data", "countdown", "--n", "6", "--numbers", "3..3", "--max-number", "9",
          "--test-size", "1", "--out", str(tmp_path)])
    roles = [m["role"] for m in load_examples(tmp_path / "test.parquet")[0].messages]
    assert roles == ["system", "user"]


def test_unknown_prompt_style_is_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["data", "countdown", "--n", "6", "--prompt-style", "fancy", "--out", str(tmp_path)])
    assert info.value.code == 2 and "prompt-style" in capsys.readouterr().err
