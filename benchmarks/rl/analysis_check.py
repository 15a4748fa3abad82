"""Does the model's turn-2 analysis carry the numbers check, and would the check rank answers?

Reads a `calibrl demo` output (run with `sft.analysis=task`) and prints, per difficulty group,
the AUROC of four scores on the same answers: the stated confidence, the *true* numbers check
(does the answer use exactly the given numbers — a perfect flag's ceiling), the flag in the
analysis the model wrote, and the answer likelihood. Then, for the first `--greedy` answers,
the warm-up model's greedy analysis against the true check, split by whether the true check
flags the answer: a model that never writes "not given"/"again" gives the confidence nothing
to read. Writes the figures as JSON to `--out`.

    python benchmarks/rl/analysis_check.py --run outputs/demo --out analysis_check.json
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import torch

from calibrl.evaluation.metrics import auroc
from calibrl.models.loading import load_policy
from calibrl.protocol.completions import answer_part
from calibrl.protocol.prompts import confidence_messages
from calibrl.protocol.tags import ANALYSIS_CLOSE, ANALYSIS_OPEN
from calibrl.tasks.countdown.check import check_flags_wrong_numbers, numbers_check
from calibrl.tasks.registry import get_task

_ANALYSIS = re.compile(re.escape(ANALYSIS_OPEN) + "(.*?)" + re.escape(ANALYSIS_CLOSE), re.S)


def true_check(row: dict) -> str:
    """The numbers check of a prediction row's answer."""
    equation = get_task("countdown").extract_answer(answer_part(row["answer"]))
    return numbers_check(equation, row["ground_truth"]["numbers"])


def written_analysis(row: dict) -> str | None:
    """The analysis the model wrote in its first confidence sample, or None."""
    match = _ANALYSIS.search(row.get("confidence_text") or "")
    return match.group(1) if match else None


def sampled_figures(rows: list[dict]) -> dict:
    """Per group: AUROC of stated confidence, true flag, written flag and likelihood."""
    groups: dict[str, list[tuple]] = defaultdict(list)
    agree = parsed = 0
    for row in rows:
        truth_ok = not check_flags_wrong_numbers(true_check(row))
        written = written_analysis(row)
        written_ok = None if written is None else not check_flags_wrong_numbers(written)
        if written_ok is not None:
            parsed += 1
            agree += written_ok == truth_ok
        conf = row["confidence"] if row["confidence"] is not None else 0.0  # unparsed: 0
        groups[row["group"]].append((row["correct"], conf, float(truth_ok),
                                     float(bool(written_ok)), row.get("answer_likelihood") or 0.0))
    out = {"written_flag_agrees": agree / max(parsed, 1), "parsed": parsed, "n": len(rows),
           "groups": {}}
    for name, items in sorted(groups.items()):
        labels = [bool(i[0]) for i in items]
        out["groups"][name] = {"n": len(items), "accuracy": sum(labels) / len(items)} | {
            key: auroc([i[k] for i in items], labels)
            for k, key in enumerate(("stated", "true_flag", "written_flag", "likelihood"), 1)}
    return out


def greedy_figures(run: Path, rows: list[dict], question: str, max_new: int = 40) -> dict:
    """The warm-up's greedy analysis of each answer against the true check."""
    model, tokenizer = load_policy(str(run / "sft/model"))
    model.eval()
    prompts = {r["extra_info"]["index"]: r["prompt"]
               for r in pq.read_table(run / "data/test.parquet").to_pylist()}
    counts: Counter = Counter()
    for row in rows:
        messages = confidence_messages(prompts[row["index"]], row["answer"], question)
        text = tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True) + ANALYSIS_OPEN
        ids = tokenizer(text, return_tensors="pt").input_ids
        with torch.inference_mode():
            out = model.generate(ids, max_new_tokens=max_new, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)
        written = tokenizer.decode(out[0, ids.shape[1]:]).split(ANALYSIS_CLOSE)[0].strip()
        truth = true_check(row)
        key = "flagged" if check_flags_wrong_numbers(truth) else "clean"
        counts[f"{key}_n"] += 1
        counts[f"{key}_exact"] += written == truth
        counts[f"{key}_written_flags"] += check_flags_wrong_numbers(written)
    return dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a calibrl demo output folder")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--greedy", type=int, default=300, help="answers to re-analyse greedily")
    parser.add_argument("--question", default="How likely is it that your answer is correct?")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = {}
    for stage in ("eval-before", "eval-after"):
        path = args.run / stage / "predictions.jsonl"
        if path.exists():
            rows = [json.loads(line) for line in path.open()]
            result[stage] = sampled_figures(rows)
    before = [json.loads(line) for line in (args.run / "eval-before/predictions.jsonl").open()]
    result["greedy_sft"] = greedy_figures(args.run, before[:args.greedy], args.question)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
