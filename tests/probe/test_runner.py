"""`run_probe` with a scripted model whose answers are known, resuming, and given traces."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from calibrl.errors import UserError
from calibrl.probe.runner import CONFIG_FILE, ROWS_FILE, SUMMARY_FILE, iter_rows, run_probe
from calibrl.probe.sampler import EngineSampler
from calibrl.settings.probe import ProbeSection
from probe.fakes import ScriptedEngine, always_right, right_after_last_step

CONFIG = ProbeSection(samples=4)


def probe(tmp_path, tokenizer, examples, answer, config=CONFIG, name="out", **kwargs):
    engine = ScriptedEngine(tokenizer, answer)
    summary = run_probe(EngineSampler(engine), tokenizer, examples, config, tmp_path / name,
                        trace_engine=engine, progress=False, **kwargs)
    return summary, list(iter_rows(tmp_path / name / ROWS_FILE))


def test_always_right_gives_confidence_one_everywhere(tmp_path, tokenizer, examples):
    summary, rows = probe(tmp_path, tokenizer, examples, always_right)
    assert len(rows) == len(examples)
    for row in rows:
        assert row["final_correct"] and row["chain_tokens"] > 0
        assert [p["confidence"] for p in row["points"]] == [1.0] * 11
        assert [p["same_answer"] for p in row["points"]] == [1.0] * 11
        assert row["decided_at"] == 0.0
    assert summary["confidence"]["mean"] == [1.0] * 11
    assert summary["same_answer_aoc"] == 0.0
    assert summary["decided"]["counts"]["0"] == len(examples)
    assert summary["decided"]["share_at_start"] == 1.0 and summary["final_accuracy"] == 1.0
    assert summary["solved_traces"] == len(examples)
    assert summary["decided_before_end_share"] == 1.0
    for name in (CONFIG_FILE, SUMMARY_FILE, "curves.png", "decided.png"):
        assert (tmp_path / "out" / name).is_file()


def test_answer_after_the_last_step_gives_zero_before_it(tmp_path, tokenizer, examples):
    summary, rows = probe(tmp_path, tokenizer, examples, right_after_last_step)
    for row in rows:
        # The completion's chain without its last line break (the forced text brings one).
        assert row["chain_text"].startswith("\n") and not row["chain_text"].endswith("\n")
        assert [p["confidence"] for p in row["points"]] == [0.0] * 10 + [1.0]
        assert [p["same_answer"] for p in row["points"]] == [0.0] * 10 + [1.0]
        assert row["decided_at"] == 1.0
    assert summary["confidence"]["mean"] == [0.0] * 10 + [1.0]
    assert summary["same_answer_aoc"] == pytest.approx(0.95)
    assert summary["decided"]["median"] == "1"
    assert summary["confidence_first"]["mean"] == 0.0 and summary["confidence_last"]["mean"] == 1.0
    assert summary["solved_traces"] == len(examples)
    assert summary["decided_before_end_count"] == 0 and summary["decided_before_end_share"] == 0.0


def wrong_trace(numbers, target):
    """A chain whose own final answer is wrong (its sum plus one never hits these targets)."""
    return "<think>\nadd them\n</think>\n<answer>" + "+".join(map(str, numbers)) + "+1</answer>"


def test_solved_traces_come_from_the_traces_own_answer(tmp_path, tokenizer, examples):
    engine = ScriptedEngine(tokenizer, always_right, trace=wrong_trace)
    summary = run_probe(EngineSampler(engine), tokenizer, examples, CONFIG, tmp_path / "w",
                        trace_engine=engine, progress=False)
    assert summary["confidence_last"]["mean"] == 1.0  # the probe's samples are all right ...
    assert summary["solved_traces"] == 0  # ... but no trace's own answer is
    assert summary["decided_before_end_share"] is None


def test_step_points_sit_on_line_boundaries(tmp_path, tokenizer, examples):
    _, rows = probe(tmp_path, tokenizer, examples, right_after_last_step,
                    ProbeSection(samples=2, points="steps"))
    for row in rows:  # the chain: "\n" + step 1 + "\n" + step 2
        cuts = [p["cut"] for p in row["points"]]
        assert len(cuts) == 3 and cuts[0] == 0 and cuts[-1] == row["chain_tokens"]
        first_step = row["chain_text"].split("\n")[1]
        assert tokenizer.decode(tokenizer(row["chain_text"])["input_ids"][:cuts[1]]) == (
            "\n" + first_step)
        assert [p["confidence"] for p in row["points"]] == [0.0, 0.0, 1.0]
        assert row["points"][1]["x"] == cuts[1] / row["chain_tokens"]


def test_every_point_shares_one_call_per_batch(tmp_path, tokenizer, examples):
    engine = ScriptedEngine(tokenizer, always_right)
    config = ProbeSection(samples=3, traces_per_batch=2)
    run_probe(EngineSampler(engine), tokenizer, examples, config, tmp_path / "o",
              trace_engine=engine, progress=False)
    probe_calls = [(count, p) for count, p in engine.calls if p.n == 3]
    assert [count for count, _ in probe_calls] == [22, 22, 11]  # 11 points x traces
    assert all(p.stop == ("</answer>",) and p.max_new_tokens == 32 for _, p in probe_calls)


class Interrupt(Exception):
    pass


class FailingSampler:
    """Probes `batches` batches, then fails as a crash would."""

    def __init__(self, inner, batches):
        self.inner, self.left = inner, batches

    def sample(self, jobs, suffix, params):
        if self.left == 0:
            raise Interrupt
        self.left -= 1
        return self.inner.sample(jobs, suffix, params)


def test_resume_after_a_crash_gives_the_same_rows(tmp_path, tokenizer, examples):
    config = ProbeSection(samples=2, traces_per_batch=2)
    _, reference = probe(tmp_path, tokenizer, examples, right_after_last_step, config, "ref")
    engine = ScriptedEngine(tokenizer, right_after_last_step)
    out = tmp_path / "crash"
    with pytest.raises(Interrupt):
        run_probe(FailingSampler(EngineSampler(engine), 1), tokenizer, examples, config, out,
                  trace_engine=engine, progress=False)
    assert len(list(iter_rows(out / ROWS_FILE))) == 2
    with (out / ROWS_FILE).open("a") as fh:
        fh.write('{"trace": 2, "index": 2, "poi')  # a row cut short by the crash
    summary = run_probe(EngineSampler(engine), tokenizer, examples, config, out,
                        trace_engine=engine, progress=False)
    assert list(iter_rows(out / ROWS_FILE)) == reference
    assert summary["traces"] == len(examples)
    trace_calls = [p for _, p in engine.calls if p.n == 1]
    assert len(trace_calls) == 2 + 2  # the resumed run generated only the missing traces


def test_a_finished_probe_is_not_redone(tmp_path, tokenizer, examples):
    probe(tmp_path, tokenizer, examples, always_right)
    engine = ScriptedEngine(tokenizer, always_right)
    summary = run_probe(EngineSampler(engine), tokenizer, examples, CONFIG, tmp_path / "out",
                        trace_engine=engine, progress=False)
    assert engine.calls == [] and summary["traces"] == len(examples)


def test_other_settings_in_the_same_folder_are_refused(tmp_path, tokenizer, examples):
    probe(tmp_path, tokenizer, examples, always_right)
    with pytest.raises(UserError, match="samples"):
        probe(tmp_path, tokenizer, examples, always_right, ProbeSection(samples=5))
    summary, rows = probe(tmp_path, tokenizer, examples, always_right, ProbeSection(samples=5),
                          overwrite=True)
    assert all(row["samples"] == 5 for row in rows) and len(rows) == len(examples)


def test_limit(tmp_path, tokenizer, examples):
    summary, rows = probe(tmp_path, tokenizer, examples, always_right,
                          ProbeSection(samples=2, limit=2))
    assert [r["trace"] for r in rows] == [0, 1] and summary["traces"] == 2


# --- given traces --------------------------------------------------------------------------

def given_rows(examples, count=None):
    from probe.fakes import solved_trace

    rows = []
    for i, ex in enumerate(examples if count is None else [examples[k % len(examples)]
                                                               for k in range(count)]):
        full = solved_trace(ex.ground_truth["numbers"], ex.ground_truth["target"])
        chain = full.split("<think>")[1].split("</think>")[0]
        answer = full.split("<answer>")[1].split("</answer>")[0]
        rows.append({"index": ex.index, "chain_of_thought": chain, "final_answer": answer,
                     "stated_confidence": (i % 5) / 4})
    return rows


def write_jsonl(path, rows, blank_every=0):
    lines = []
    for i, row in enumerate(rows):
        lines.append(json.dumps(row))
        if blank_every and i % blank_every == 0:
            lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_given_traces(tmp_path, tokenizer, examples):
    rows_in = given_rows(examples)
    rows_in[1]["final_answer"] = "<answer>wrong</answer>"
    rows_in[2].pop("stated_confidence")
    path = write_jsonl(tmp_path / "traces.jsonl", rows_in, blank_every=2)
    summary, rows = probe(tmp_path, tokenizer, examples, always_right, traces_path=path)
    assert [r["index"] for r in rows] == [ex.index for ex in examples]
    assert [r["trace"] for r in rows] == [0, 2, 3, 5, 6]  # line numbers (blank lines count)
    assert [r["final_correct"] for r in rows] == [True, False, True, True, True]
    assert rows[1]["points"][0]["same_answer"] == 0.0  # the probe's answer is not "wrong"
    assert all(p["confidence"] == 1.0 for r in rows for p in r["points"])
    assert summary["stated_confidence"]["traces"] == 4
    assert summary["stated_confidence"]["pearson_r"] is None  # probe confidence is constant


def test_given_trace_with_its_own_prompt_and_ground_truth(tmp_path, tokenizer, examples):
    gt = {"target": 8, "numbers": [3, 5, 7]}
    prompt = ("<|im_start|>user\nUsing the numbers [3, 5, 7], create an equation that equals 8."
              "<|im_end|>\n<|im_start|>assistant\n<think>")
    path = write_jsonl(tmp_path / "t.jsonl", [{"prompt": prompt, "cot": "\n3 * 5 = 15\n15 - 7 = 8\n",
                                               "answer": "3 * 5 - 7", "ground_truth": gt,
                                               "confidence": "<confidence>0.9</confidence>"}])
    _, rows = probe(tmp_path, tokenizer, [], right_after_last_step, traces_path=path)
    (row,) = rows
    assert row["stated_confidence"] == 0.9 and row["final_correct"]
    assert row["context_tokens"] == len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert [p["confidence"] for p in row["points"]] == [0.0] * 10 + [1.0]


@pytest.mark.parametrize("row, message", [
    ("not json", "not JSON"),
    ({"final_answer": "1"}, "chain_of_thought"),
    ({"cot": "x", "index": 99}, "no example with index 99"),
    ({"cot": "x", "index": "a"}, "not an integer"),
    ({"cot": "x", "stated_confidence": 1.5}, r"not in \[0, 1\]"),
    ({"cot": "x", "stated_confidence": "high"}, "not a number"),
    ({"cot": "x", "prompt": 3}, "prompt"),
    ({"cot": "x", "prompt": [{"role": "user"}]}, "content"),
    ({"cot": "x", "data_source": "chess"}, "unknown data_source"),
    ({"cot": "x", "ground_truth": {"target": 1}}, "numbers"),
])
def test_bad_traces_are_user_errors_naming_the_line(tmp_path, tokenizer, examples, row, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(given_rows(examples)[0]) + "\n"
                    + (row if isinstance(row, str) else json.dumps(row)) + "\n")
    with pytest.raises(UserError, match=message) as err:
        probe(tmp_path, tokenizer, examples, always_right, traces_path=path)
    assert "line 2" in str(err.value)


def test_memory_does_not_grow_with_the_number_of_traces(tmp_path, tokenizer, examples,
                                                        monkeypatch):
    import calibrl.probe.runner as runner

    # The figures' one-time costs (font caches) are not what this measures: report apart.
    monkeypatch.setattr(runner, "write_report", lambda out, config: None)

    def peak(count):
        path = write_jsonl(tmp_path / f"many{count}.jsonl", given_rows(examples, count))
        engine = ScriptedEngine(tokenizer, always_right)
        config = ProbeSection(samples=2, points="0,1", traces_per_batch=4)
        tracemalloc.start()
        run_probe(EngineSampler(engine), tokenizer, examples, config, tmp_path / f"m{count}",
                  traces_path=path, progress=False)
        result = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return result

    peak(10)  # one-time costs (imports, caches) land here
    small, large = peak(20), peak(150)
    assert large < small + 100_000  # keeping the 130 extra rows would take ~200 kB
    summary = runner.summarise(runner.iter_rows(tmp_path / "m150" / ROWS_FILE), [0.0, 1.0], 0.8)
    assert summary["traces"] == 150
