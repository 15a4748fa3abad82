"""`calibrl eval`: generate with a model on a data file, verify, and write metrics and figures.

Each prompt gets `samples` answers in the mode's format (rollouts of `calibrl.rollout.rollouts`),
in a mode with a confidence turn each answer gets one, and every answer becomes one record:
correct (the task's verifier), the parsed confidence (None when unparsable; the metrics
count it as 0 and report the share), whether an answer could be extracted at all
(`format_ok`, `Task.extract_answer`), the token lengths of both turns, and the problem's
difficulty `group` (`Task.difficulty`, e.g. "3 numbers"; metrics.json reports each group), the
answer's likelihood under the model (`calibrl.evaluation.baselines`, a baseline only), the
expected value of the model's distribution over its stated value beside the sampled one
(`stated_expected`, `calibrl.evaluation.stated_value`; `eval.confidence_reading` says which of
the two the headline scores) and the problem's readout `cluster` (`Task.readout_cluster`: the problem, or what the task says belongs
together, e.g. a made-up country's four questions), by which the readout reference and the
difficulty table are folded and the bootstrap draws.
The rows are the records the metrics read (`calibrl.evaluation.records`): the evaluation is
computed once (`compute_evaluation`) and then written.
Writes, in `out_dir`: `predictions.jsonl` (one line per answer), `metrics.json`, `bins.json`,
and the PNG figures, all swapped in at once when they are done: a killed evaluation leaves the
previous one whole (other files in `out_dir` stay). A folder that already holds an evaluation is
replaced only with `overwrite`: a second evaluation into it is refused before any work.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from calibrl.algo import score_tree
from calibrl.algo.readout import last_states, out_of_fold_readout, state_sequences
from calibrl.algo.rollout_tree import AnswerNode, RolloutTree
from calibrl.algo.self_estimates import answer_likelihood
from calibrl.data import TaskExample
from calibrl.errors import UserError, already_holds, no_rows
from calibrl.evaluation.report import EVALUATION_FILES, write_evaluation
from calibrl.evaluation.result import compute_evaluation
from calibrl.evaluation.stated_value import turn2_reads
from calibrl.protocol.completions import answer_part
from calibrl.protocol.modes import ModeSpec, get_mode
from calibrl.rewards import parse_confidence
from calibrl.rollout.factory import make_engine
from calibrl.rollout.rollouts import RolloutSettings, sample_answers, sample_confidences
from calibrl.settings.eval import EvalSection
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples
from calibrl.utils.atomic import atomic_dir
from calibrl.utils.files import check_output_dir

PREDICTIONS_FILE = "predictions.jsonl"


def _stated_confidence(spec: ModeSpec, answer: AnswerNode) -> float | None:
    """The confidence stated about `answer` (in its first turn-2 sample, or in the answer itself);
    None when the mode states none or it does not parse."""
    if not spec.states_confidence:
        return None
    texts = spec.confidence_texts(answer.sample.text, [c.text for c in answer.confidences[:1]])
    return parse_confidence(texts[0] if texts else "")


def _records(tree: RolloutTree) -> list[dict[str, Any]]:
    rows = []
    for prompt in tree.prompts:
        task = get_task(prompt.data_source)
        group = task.difficulty(prompt.ground_truth)
        cluster = str(task.readout_cluster(prompt.ground_truth))
        for answer in prompt.answers:
            text = answer.sample.text
            conf_text = answer.confidences[0].text if answer.confidences else None
            confidence = _stated_confidence(tree.spec, answer)
            rows.append({
                "index": prompt.index, "ground_truth": dict(prompt.ground_truth),
                "answer": text, "correct": bool(answer.correct),
                "format_ok": task.extract_answer(answer_part(text)) is not None,
                "confidence_text": conf_text, "confidence": confidence,
                "answer_len": len(answer.sample.token_ids),
                "conf_len": len(answer.confidences[0].token_ids) if answer.confidences else None,
                "finish_reason": answer.sample.finish_reason, "group": group,
                "cluster": cluster,
                "answer_likelihood": answer_likelihood(answer.sample.logprobs),
                "extra_scores": task.extra_scores(answer_part(text), prompt.ground_truth),
            })
    return rows


def evaluate_examples(model: Any, tokenizer: Any, examples: Sequence[TaskExample],
                      settings: EvalSection, *, engine: Any = None, progress: bool = True,
                      max_prompt_tokens: int = 256, chat_template: str = "auto",
                      stated_expected: bool = True) -> list[dict[str, Any]]:
    """Prediction rows (one per answer) for `examples` (prompts rendered as in training:
    `chat_template`, left-truncated to `max_prompt_tokens`). With `settings.readout`, a model
    and a confidence turn, each row's "readout" is scored out of fold, folds by "cluster".
    With `stated_expected`, each row has "stated_expected" (or why not,
    `stated_expected_fields`): one more forward pass over the turn-2 sequences, which also
    gives the readout's states (`turn2_reads`)."""
    engine = engine or make_engine("hf", model, tokenizer, decode=settings.decode)
    rollout = RolloutSettings(num_generations_answer=settings.samples,
                              num_generations_confidence=1, temperature=settings.temperature,
                              confidence_temperature=settings.confidence_temperature,
                              top_p=settings.top_p, top_k=settings.top_k,
                              max_answer_tokens=settings.max_answer_tokens,
                              max_confidence_tokens=settings.max_confidence_tokens,
                              confidence_question=settings.confidence_question,
                              max_prompt_tokens=max_prompt_tokens, chat_template=chat_template,
                              reanswers_shown=settings.reanswers_shown)
    rows: list[dict[str, Any]] = []
    states: list[np.ndarray] = []
    chunks = range(0, len(examples), settings.batch_prompts)
    for n, start in enumerate(tqdm(chunks, desc=f"eval {settings.mode}", disable=not progress)):
        chunk = examples[start:start + settings.batch_prompts]
        seed = settings.seed * 1_000_003 + n
        tree = sample_answers(engine, tokenizer, chunk, rollout, settings.mode, seed)
        if tree.spec.has_confidence_turn:
            sample_confidences(engine, tokenizer, tree, chunk, rollout, n=1, seed=seed)
        chunk_rows = _records(score_tree(tree))
        read_state = settings.readout and model is not None and tree.spec.has_confidence_turn
        if stated_expected:
            fields, chunk_states = turn2_reads(model, tokenizer, tree, readout=read_state)
            for row, field in zip(chunk_rows, fields, strict=True):
                row.update(field)
        elif read_state:
            chunk_states = last_states(model, state_sequences(tokenizer, tree))
        rows += chunk_rows
        if read_state:
            states.append(chunk_states)
    if states and rows:
        readout = out_of_fold_readout(np.concatenate(states), [r["correct"] for r in rows],
                                      [r["cluster"] for r in rows])
        for row, score in zip(rows, readout, strict=True):
            row["readout"] = float(score)
    return rows


POOLED = "pooled"


def read_predictions(folder: Path) -> list[dict[str, Any]]:
    """The records an evaluation wrote into `folder` (its predictions.jsonl)."""
    lines = (folder / PREDICTIONS_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def write_run(out: Path, rows: list[dict[str, Any]], settings: EvalSection, name: str,
              extra_files: Mapping[str, str] | None = None) -> dict[str, Any]:
    """predictions.jsonl, metrics.json, figures of `rows` and `extra_files` ({name: text}, e.g.
    what produced the rows), swapped into `out` at once."""
    extra_files = extra_files or {}
    with atomic_dir(out, own={PREDICTIONS_FILE, *EVALUATION_FILES, *extra_files}) as tmp:
        (tmp / PREDICTIONS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows),
                                            encoding="utf-8")
        for file_name, text in extra_files.items():
            (tmp / file_name).write_text(text, encoding="utf-8")
        # Answers of one cluster (the problem; for facts the country) are not independent: the
        # bootstrap draws them together and the table leaves them out together, as the readout.
        result = compute_evaluation(rows, name=name, mode=settings.mode,
                                    with_confidence=get_mode(settings.mode).states_confidence,
                                    clusters=[row["cluster"] for row in rows],
                                    bootstrap=settings.bootstrap,
                                    reading=settings.confidence_reading)
        return write_evaluation(tmp, result)


def _labels(paths: Sequence[str | Path]) -> list[str]:
    """A folder name per data file: its stem, numbered when two files share one."""
    stems = [Path(p).stem or "data" for p in paths]
    return [s if stems.count(s) == 1 else f"{s}-{i}" for i, s in enumerate(stems)]


def _holds_evaluation(folder: Path) -> bool:
    return any((folder / name).exists() for name in (PREDICTIONS_FILE, *EVALUATION_FILES))


def evaluate(model_path: str | Path, data_path: str | Path | Sequence[str | Path],
             out_dir: str | Path, settings: EvalSection, *, name: str | None = None,
             overwrite: bool = False) -> dict[str, Any] | list[dict[str, Any]]:
    """Evaluate a saved model on a data file; returns the metrics dict (also in metrics.json).
    A folder that holds an evaluation is replaced only with `overwrite`.

    Given several data files (any mix of tasks), the model is loaded once, each file is
    evaluated into `out_dir/<file stem>` and all answers together into `out_dir/pooled`
    (groups prefixed by the data set, problems kept apart); returns the list of metrics, the
    pooled last — cross-dataset calibration as RLCR reports it.
    """
    from calibrl.models.loading import load_policy, resolve_model_path

    out = Path(out_dir)
    check_output_dir(out, "output folder")  # before minutes of generation, not after
    paths = [data_path] if isinstance(data_path, str | Path) else list(data_path)
    folders = [out] if len(paths) == 1 else [out / label for label in _labels(paths)] + [
        out / POOLED]
    for folder in folders:
        if not overwrite and _holds_evaluation(folder):
            raise already_holds(folder, "an evaluation")
    if settings.max_examples == 0:
        raise UserError("max_examples 0 leaves no example to evaluate")
    sets = []
    for path in paths:
        examples = load_examples(path)
        if not examples:
            raise no_rows(path)
        sets.append(examples[: settings.max_examples])
    model, tokenizer = load_policy(resolve_model_path(str(model_path), out))
    name = name or out.name
    if len(paths) == 1:
        return write_run(out, evaluate_examples(model, tokenizer, sets[0], settings),
                         settings, name)
    results, pooled = [], []
    for label, examples in zip(_labels(paths), sets, strict=True):
        rows = evaluate_examples(model, tokenizer, examples, settings)
        results.append(write_run(out / label, rows, settings, f"{name}/{label}"))
        pooled += [{**r, "index": f"{label}:{r['index']}", "cluster": f"{label}:{r['cluster']}",
                    "group": f"{label}: {r['group']}", "data": label} for r in rows]
    results.append(write_run(out / POOLED, pooled, settings, f"{name}/{POOLED}"))
    return results
