"""`calibrl eval` end to end on a tiny random model, and its bad-input errors."""

import json

import pytest

import calibrl.evaluation.run as run_module
from calibrl.cli.main import main
from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.evaluation.bootstrap import BOOTSTRAP_METRICS
from calibrl.evaluation.run import evaluate
from calibrl.settings import EvalSection
from calibrl.tasks.countdown import COUNTDOWN
from calibrl.tasks.files import write_examples


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("eval")
    model = tiny_model_dir
    # Two and three numbers alternate, so predictions fall into two difficulty groups.
    gts = [{"target": 3 + i, "numbers": [1, 2, i][: 2 + i % 2]} for i in range(5)]
    data = write_examples(root / "test.parquet", [
        TaskExample("countdown", COUNTDOWN.make_prompt(gt), gt, i, "test")
        for i, gt in enumerate(gts)])
    return root, model, data


@pytest.mark.parametrize("mode", ["two_turn", "rlcr", "rlvr"])
def test_eval_writes_predictions_and_metrics(setup, mode):
    root, model, data = setup
    out = root / f"out-{mode}"
    metrics = evaluate(model, data, out, EvalSection(mode=mode, samples=2, temperature=1.0,
                                                      max_answer_tokens=6,
                                                      max_confidence_tokens=4))
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and metrics["count"] == 10
    assert {r["index"] for r in rows} == set(range(5))
    # Countdown's readout cluster is the problem (`Task.readout_cluster`'s default).
    assert {r["cluster"] for r in rows} == {str(COUNTDOWN.problem_key(r["ground_truth"]))
                                            for r in rows}
    assert len({r["cluster"] for r in rows}) == 5
    assert all(r["answer_len"] <= 6 + (4 if mode == "rlcr" else 0) for r in rows)
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["mode"] == mode and saved["accuracy"] == metrics["accuracy"]
    # The random tiny model rarely writes a confidence that parses: with fewer than half parsed
    # the calibration metrics are not available, and say why (test_calibration_unavailable).
    stated = mode != "rlvr"
    unavailable = saved.get("calibration_unavailable")
    assert (unavailable is not None) == (stated and saved["unparsable_confidence_rate"] > 0.5)
    assert (saved["ece"] is None) == (not stated or unavailable is not None)
    assert ((out / "reliability.png").exists()) == (mode != "rlvr")
    assert ((out / "risk_coverage.png").exists()) == (mode != "rlvr")
    assert all(r["group"] == f"{2 + r['index'] % 2} numbers" for r in rows)
    assert list(saved["by_group"]) == ["2 numbers", "3 numbers"]
    assert saved["by_group"]["2 numbers"]["count"] == 6
    assert (saved["aurc"] is None) == (saved["ece"] is None)
    # The default 1,000 bootstrap draws over the 5 problems: accuracy's interval for every mode.
    assert set(saved["bootstrap"]) == ({"accuracy"} if saved["ece"] is None
                                       else set(BOOTSTRAP_METRICS))
    assert saved["bootstrap"]["accuracy"]["draws"] == 1000
    # Every answer's likelihood under the model; the baselines come with a stated confidence.
    assert all(0.0 < r["answer_likelihood"] <= 1.0 for r in rows)
    assert ("baselines" in saved) == (mode != "rlvr")
    if mode != "rlvr":
        likelihood = saved["baselines"]["answer_likelihood"]
        assert set(likelihood["by_group"]) == {"2 numbers", "3 numbers"}
        assert 0.0 <= saved["baselines"]["difficulty_table"]["brier"] <= 1.0


def test_eval_cli_prints_group_table(setup, capsys):
    root, model, data = setup
    out = root / "out-cli"
    main(["eval", "--model", str(model), "--data", str(data), "--out", str(out),
          "--max-answer-tokens", "4", "--max-confidence-tokens", "3"])
    printed = capsys.readouterr().out
    assert "| AURC ↓ |" in printed and "| run | group |" in printed
    assert "| within-group AUROC ↑ |" in printed and "| difficulty table |" in printed
    assert "| out-cli | 3 numbers | 2 |" in printed
    assert "Bootstrap over the evaluated problems" in printed and "| out-cli | ± " in printed


def test_eval_settings_errors():
    with pytest.raises(UserError, match="repeats one greedy answer"):
        EvalSection.create(samples=3, temperature=0.0)
    with pytest.raises(UserError, match="unknown mode"):
        EvalSection.create(mode="ppo")


def test_eval_cli_bad_inputs_exit_2(setup, tmp_path, capsys):
    root, model, data = setup
    cases = [
        ["eval", "--model", str(model), "--data", str(tmp_path / "none.parquet"), "--out", str(tmp_path)],
        ["eval", "--model", str(tmp_path / "nomodel"), "--data", str(data), "--out", str(tmp_path)],
        ["compare", str(tmp_path / "not-a-run")],
    ]
    for argv in cases:
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and "\n" not in err


def test_eval_on_two_data_sets_of_different_tasks_reports_each_and_pooled(setup, tmp_path,
                                                                          capsys):
    root, model, countdown = setup
    from calibrl.tasks.short_answer.data import row_ground_truth, short_answer_example

    qa = [short_answer_example(row_ground_truth({"question": f"Capital number {i}?",
                                                 "answers": [f"City {i}"], "level": "easy"}),
                               i, "test", "compact") for i in range(3)]
    facts = write_examples(tmp_path / "facts.parquet", qa)
    out = tmp_path / "cross"
    main(["eval", "--model", str(model), "--data", str(countdown), "--data", str(facts),
          "--out", str(out), "--max-answer-tokens", "4", "--max-confidence-tokens", "3",
          "bootstrap=20"])
    printed = capsys.readouterr().out
    each = {p.name: json.loads((p / "metrics.json").read_text()) for p in out.iterdir()}
    assert set(each) == {"test", "facts", "pooled"}
    assert (each["test"]["count"], each["facts"]["count"]) == (5, 3)  # one answer each
    pooled = each["pooled"]
    assert pooled["count"] == 8
    # pooled accuracy is the answer-weighted mean of the data sets'
    assert pooled["accuracy"] == pytest.approx(
        (5 * each["test"]["accuracy"] + 3 * each["facts"]["accuracy"]) / 8)
    # groups keep their data set's name, so no two tasks' groups merge
    assert set(pooled["by_group"]) == {"test: 2 numbers", "test: 3 numbers", "facts: easy"}
    rows = [json.loads(line) for line in (out / "pooled" / "predictions.jsonl").read_text()
            .splitlines()]
    assert [r["data"] for r in rows] == ["test"] * 5 + ["facts"] * 3
    assert len({r["index"] for r in rows}) == 8  # problem 0 of each set stays two problems
    for run in ("cross/test", "cross/facts", "cross/pooled"):
        assert f"| {run} |" in printed


def test_a_country_s_questions_stay_together_in_readout_table_and_bootstrap(
        tmp_path, tiny_model_dir, monkeypatch):
    from calibrl.tasks.short_answer.facts import country_of
    from calibrl.tasks.short_answer.task import ShortAnswerTask

    train, test = ShortAnswerTask().generate(16, seed=0, test_size=8)  # 4 countries
    data = write_examples(tmp_path / "facts.parquet", test + train)
    seen = {}
    real = run_module.out_of_fold_readout

    def spy(features, correct, clusters, *args, **kwargs):
        seen["clusters"] = list(clusters)
        return real(features, correct, clusters, *args, **kwargs)

    real_compute = run_module.compute_evaluation

    def spy_compute(records, **kwargs):
        seen["table and bootstrap"] = list(kwargs["clusters"])
        return real_compute(records, **kwargs)

    monkeypatch.setattr(run_module, "out_of_fold_readout", spy)
    monkeypatch.setattr(run_module, "compute_evaluation", spy_compute)
    out = tmp_path / "eval"
    evaluate(tiny_model_dir, data, out, EvalSection(max_answer_tokens=4,
                                                    max_confidence_tokens=3, bootstrap=20))
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert seen["clusters"] == [r["cluster"] for r in rows]
    # The difficulty table leaves a country out whole and the bootstrap draws it whole: its
    # answers are known or not together, so one question per draw would narrow the interval.
    assert seen["table and bootstrap"] == seen["clusters"]
    assert len({r["index"] for r in rows}) == 8
    assert [r["cluster"] for r in rows] == [
        f"country: {country_of(r['ground_truth']['question'])}" for r in rows]
    assert len(set(seen["clusters"])) == 4
    assert all(r["readout"] is not None for r in rows)


def test_eval_decodes_with_the_configured_step(tmp_path, tiny_model_dir, monkeypatch):
    seen = []
    real = run_module.make_engine

    def spy(*args, **kwargs):
        engine = real(*args, **kwargs)
        seen.append(engine.decode)
        return engine

    monkeypatch.setattr(run_module, "make_engine", spy)
    data = write_examples(tmp_path / "d.parquet", [TaskExample(
        "countdown", COUNTDOWN.make_prompt({"target": 3, "numbers": [1, 2]}),
        {"target": 3, "numbers": [1, 2]}, 0)])
    metrics = evaluate(tiny_model_dir, data, tmp_path / "e",
                       EvalSection(max_answer_tokens=4, max_confidence_tokens=3, bootstrap=0,
                                   decode="fused"))
    assert seen == ["fused"] and metrics["count"] == 1
