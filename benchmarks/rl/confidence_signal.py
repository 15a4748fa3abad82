"""Is "this answer is right" readable where the model states its confidence? A cheap test.

Before spending RL steps on a route, measure whether the signal RL must surface is there: for each
evaluated answer, rebuild the turn-2 context as the rollout does (prompt, answer, the confidence
question) plus the model's own analysis up to `<confidence>`, run the model once, and read

- `expected`: the confidence the model's next-token distribution states on average,
  sum_v p(v) * v over the confidence tokens 0.0 .. 1.0 (what RL moves; the sampled text is one
  draw of it);
- `linear probe`: a logistic regression on the last hidden state at that position, fitted with
  5 folds of problems (out-of-fold predictions): how much a *linear readout* of what the model
  already computes there knows about correctness. If it ranks well inside a difficulty, RL needs
  only to learn the readout (the output head is linear); if it does not, RL must change what the
  model computes before it can state it.

Printed: overall and within-group AUROC of each score, next to the stated confidence and the
answer likelihood of the same evaluation (`calibrl.evaluation.baselines`). Writes
`<out>.json`. Run on a demo's evaluation:

    .venv/bin/python benchmarks/rl/confidence_signal.py --model outputs/demo/sft/model \
        --eval outputs/demo/eval-before --data outputs/demo/data/test.parquet --out sft-signal
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from calibrl.algo.readout import fit_logistic
from calibrl.demo.pipeline import load_demo_settings
from calibrl.evaluation.baselines import within_group_auroc
from calibrl.evaluation.metrics import auroc
from calibrl.models.loading import load_policy
from calibrl.protocol.modes import get_mode
from calibrl.rollout.rollouts import encode_messages
from calibrl.tasks.files import load_examples

TAG = "<confidence>"
VALUES = [round(0.1 * i, 1) for i in range(11)]


def contexts(rows, examples, tokenizer, question):
    spec = get_mode("two_turn")
    by_index = {ex.index: ex for ex in examples}
    for row in rows:
        messages = spec.confidence_prompt(by_index[row["index"]].messages, row["answer"], question)
        ids = encode_messages(tokenizer, messages)
        text = row["confidence_text"] or ""
        cut = text.find(TAG)
        prefix = (text[:cut] if cut >= 0 else "<analysis></analysis>\n") + TAG
        yield ids + tokenizer(prefix, add_special_tokens=False)["input_ids"]


@torch.no_grad()
def features(model, tokenizer, rows, examples, question):
    value_ids = [tokenizer(f"{v:.1f}", add_special_tokens=False)["input_ids"] for v in VALUES]
    single = all(len(ids) == 1 for ids in value_ids)
    hidden, expected = [], []
    for ids in contexts(rows, examples, tokenizer, question):
        out = model(torch.tensor([ids]), output_hidden_states=True)
        hidden.append(out.hidden_states[-1][0, -1].float().numpy())
        if single:
            p = torch.softmax(out.logits[0, -1].float(), -1)[[i[0] for i in value_ids]]
            expected.append(float((p * torch.tensor(VALUES)).sum() / p.sum()))
    return np.stack(hidden), (np.array(expected) if single else None)


def linear_probe(x, y, problems, folds=5, l2=1.0, steps=300):
    """Out-of-fold P(correct) of an L2 logistic regression on standardised features."""
    order = list(dict.fromkeys(problems))
    fold = np.array([order.index(p) % folds for p in problems])
    out = np.zeros(len(y))
    for k in range(folds):
        train, test = fold != k, fold == k
        mu, sd = x[train].mean(0), x[train].std(0) + 1e-6
        # calibrl's readout solver; its penalty is not divided by the rows, this probe's was
        w, b = fit_logistic(torch.tensor((x[train] - mu) / sd, dtype=torch.float64),
                            torch.tensor(y[train], dtype=torch.float64),
                            l2 / int(train.sum()), steps)
        xs = torch.tensor((x[test] - mu) / sd, dtype=torch.float64)
        out[test] = torch.sigmoid(xs @ w + b).numpy()
    return out


def report(name, scores, correct, groups):
    within, per_group = within_group_auroc(scores, correct, groups)
    cells = " | ".join(f"{v:.3f}" if v is not None else "n/a" for v in per_group.values())
    return (f"| {name} | {auroc(scores, correct):.3f} | {within:.3f} | {cells} |",
            {"auroc": auroc(scores, correct), "within_group_auroc": within, "by_group": per_group})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--eval", type=Path, required=True, help="an evaluation's folder")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    question = load_demo_settings(None).eval.confidence_question
    rows = [json.loads(line) for line in (args.eval / "predictions.jsonl").read_text().splitlines()]
    model, tokenizer = load_policy(args.model)
    model.eval()
    x, expected = features(model, tokenizer, rows, load_examples(args.data), question)
    correct = np.array([r["correct"] for r in rows], dtype=float)
    groups = [r["group"] for r in rows]
    stated = np.array([r["confidence"] if r["confidence"] is not None else 0.0 for r in rows])
    scores = {"stated confidence": stated,
              "answer likelihood": np.array([r["answer_likelihood"] for r in rows]),
              "linear probe at <confidence>": linear_probe(x, correct, [r["index"] for r in rows])}
    if expected is not None:
        scores["expected stated confidence"] = expected
    labels = list(within_group_auroc(stated, correct, groups)[1])
    lines = ["| score | AUROC | within-group | " + " | ".join(labels) + " |",
             "|---|---:|---:|" + "---:|" * len(labels)]
    results = {}
    for name, score in scores.items():
        line, results[name] = report(name, score, correct, groups)
        lines.append(line)
    print("\n".join(lines))
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
