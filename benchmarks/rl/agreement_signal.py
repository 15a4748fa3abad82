"""How well would k fresh re-answers rank a model's answers? A cheap test of the re-answer route.

Before teaching a model to answer again in turn 2 (`sft.analysis: reanswer`, `calibrl
calibrate --analysis reanswer`), measure what such re-answers could at best say: sample n
turn-1 answers per prompt, and score each answer by the share of k of the prompt's *other*
samples that give the same answer (a stand-in for k perfectly fresh re-answers). Printed for
k = 1 .. n-1: AUROC overall, within each difficulty group (`calibrl.evaluation.baselines`) and
inside one named group, and the mean agreement per group. Writes `<out>.json`.

    .venv/bin/python benchmarks/rl/agreement_signal.py --model outputs/demo_facts/calibrate/model \
        --data outputs/demo_facts/data/test.parquet --samples 8 --group half --out facts-agree
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from calibrl.algo import score_tree
from calibrl.evaluation.baselines import within_group_auroc
from calibrl.evaluation.metrics import auroc
from calibrl.models.loading import load_policy
from calibrl.protocol.completions import answer_part
from calibrl.rollout.factory import make_engine
from calibrl.rollout.rollouts import RolloutSettings, sample_answers
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples


def sampled_answers(model_dir: str, data: str, samples: int, limit: int, max_tokens: int,
                    temperature: float) -> list[tuple[str, bool, str | None, list[str | None]]]:
    """Per sampled answer: (group, correct, its extracted answer, the prompt's others)."""
    model, tokenizer = load_policy(model_dir)
    engine = make_engine("hf", model, tokenizer)
    settings = RolloutSettings(num_generations_answer=samples, temperature=temperature,
                               max_answer_tokens=max_tokens)
    examples = load_examples(data)[:limit]
    rows = []
    for start in range(0, len(examples), 50):
        tree = score_tree(sample_answers(engine, tokenizer, examples[start:start + 50],
                                         settings, "two_turn", start))
        for prompt in tree.prompts:
            task = get_task(prompt.data_source)
            keys = [task.extract_answer(answer_part(a.sample.text)) for a in prompt.answers]
            for i, answer in enumerate(prompt.answers):
                rows.append((task.difficulty(prompt.ground_truth), bool(answer.correct),
                             keys[i], keys[:i] + keys[i + 1:]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True, help="held-out prompts (the test split)")
    parser.add_argument("--samples", type=int, default=8, help="answers per prompt (n)")
    parser.add_argument("--limit", type=int, default=300, help="prompts")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--group", default=None, help="a group to report AUROC inside")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = sampled_answers(args.model, args.data, args.samples, args.limit, args.max_tokens,
                           args.temperature)
    correct = np.array([r[1] for r in rows])
    groups = [r[0] for r in rows]
    inside = [i for i, g in enumerate(groups) if g == args.group]
    result: dict = {"answers": len(rows), "accuracy": float(correct.mean()), "by_k": {}}
    for k in range(1, args.samples):
        score = np.array([np.mean([o is not None and o == r[2] for o in r[3][:k]])
                          for r in rows])
        entry = {"auroc": auroc(score, correct),
                 "within_group_auroc": within_group_auroc(score, correct, groups)[0],
                 "mean_agreement": {g: float(score[[i for i, h in enumerate(groups) if h == g]]
                                                .mean()) for g in sorted(set(groups))}}
        if inside:
            entry[f"auroc_in_{args.group}"] = auroc(score[inside], correct[inside])
        result["by_k"][k] = entry
        print(f"k={k}: " + ", ".join(f"{name} {value:.3f}" for name, value in entry.items()
                                     if isinstance(value, float)))
    Path(f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
