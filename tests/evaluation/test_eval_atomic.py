"""An evaluation that dies while writing leaves the previous evaluation's files, all of them."""

import pytest

import calibrl.evaluation.run as run_module
from calibrl.data import TaskExample
from calibrl.evaluation.run import evaluate
from calibrl.settings import EvalSection
from calibrl.tasks.countdown import COUNTDOWN
from calibrl.tasks.files import write_examples


def test_a_failed_evaluation_keeps_the_old_predictions_and_metrics(tmp_path, monkeypatch,
                                                                    tiny_model_dir):
    model = tiny_model_dir
    gts = [{"target": 3, "numbers": [1, 2]}, {"target": 4, "numbers": [2, 2]}]
    data = write_examples(tmp_path / "test.parquet", [
        TaskExample("countdown", COUNTDOWN.make_prompt(gt), gt, i, "test")
        for i, gt in enumerate(gts)])
    out = tmp_path / "eval"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    settings = EvalSection(max_answer_tokens=4, max_confidence_tokens=4)
    evaluate(model, data, out, settings)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = run_module.write_evaluation

    def dying(run_dir, *args, **kwargs):
        real(run_dir, *args, **kwargs)  # every new file written...
        raise KeyboardInterrupt  # ...and killed before they are published

    monkeypatch.setattr(run_module, "write_evaluation", dying)
    with pytest.raises(KeyboardInterrupt):
        evaluate(model, data, out, EvalSection(max_answer_tokens=6, max_confidence_tokens=4,
                                                seed=1), overwrite=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval", "test.parquet"]
    assert "predictions.jsonl" in before and "metrics.json" in before
