"""Traces to probe: a prompt, a chain of thought and the final answer the chain led to.

Two sources:
- generated: the model answers the data's prompts (greedy or sampled). The chain is the run of
  generated token ids between `<think>` and `</think>` (between `<think>` and `<answer>` when the
  model never closed the thought; from the start when it never opened one); its ids are the
  model's own, never re-tokenised. The final answer is extracted from the completion as the
  training reward extracts it.
- given: a JSON-lines file, one trace a line (`read_given_traces` names the fields); prompt and
  chain are tokenised once.

`context_ids` is everything before the chain: the prompt, and in the answer the opening tag.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibrl.data import TaskExample
from calibrl.errors import UserError, no_rows
from calibrl.probe.judge import final_answer_of, judge, judge_completion
from calibrl.probe.points import char_ends, end_without_trailing_blanks, token_texts
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, CONFIDENCE_OPEN
from calibrl.rewards import parse_confidence
from calibrl.rollout.engine import Engine, Generation, SamplingParams
from calibrl.rollout.rollouts import encode_messages
from calibrl.rollout.sampling import derive_seed
from calibrl.rollout.stopping import decode
from calibrl.settings.probe import ANSWER_STOP, ProbeSection
from calibrl.tasks import DEFAULT_TASK, get_task
from calibrl.utils.files import require_file


@dataclass(frozen=True)
class Trace:
    """One chain of thought to probe.

    Attributes:
        key: position in its source (data row, or line of the traces file): names the trace
            in the output, on resume and in the seeds of its samples.
        index: the data example's `index`.
        context_ids: prompt plus what precedes the chain in the answer.
        chain_ids: the chain's tokens.
        final_answer: the answer the full trace gave, as extracted (None: it gave none).
        final_correct: whether that answer is correct (the training reward's verifier).
        stated_confidence: the confidence the trace stated, if any.
        completion: the generated completion's text (generated traces only).
    """

    key: int
    index: int
    data_source: str
    ground_truth: dict[str, Any]
    context_ids: list[int]
    chain_ids: list[int]
    final_answer: str | None
    final_correct: bool
    stated_confidence: float | None = None
    completion: str | None = None


def chain_span(tokenizer: Any, token_ids: Sequence[int], think_open: str, think_close: str
               ) -> tuple[int, int]:
    """`(start, end)`: the chain is `token_ids[start:end]`.

    A token that holds part of a tag is never in the chain, nor is trailing whitespace (the
    probe's forced text brings the line break). Without `think_close` the chain ends before
    `<answer>`, without that at the end; without `think_open` it starts at 0.
    """
    texts = token_texts(tokenizer, token_ids)
    text, ends = "".join(texts), char_ends(texts)
    starts = [e - len(t) for e, t in zip(ends, texts, strict=True)]
    open_at = text.find(think_open)
    body_from = 0 if open_at == -1 else open_at + len(think_open)
    start = 0 if open_at == -1 else sum(1 for s in starts if s < body_from)
    close_at = text.find(think_close, body_from)
    if close_at == -1:
        close_at = text.find(ANSWER_OPEN, body_from)
    if close_at == -1:
        close_at = len(text)
    end = sum(1 for e in ends if e <= close_at)
    return start, end_without_trailing_blanks(texts, start, max(start, end))


def _strip_trailing_special(tokenizer: Any, ids: list[int]) -> list[int]:
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    while ids and ids[-1] in special:
        ids = ids[:-1]
    return ids


def trace_from_generation(key: int, example: TaskExample, prompt_ids: Sequence[int],
                          generation: Generation, tokenizer: Any, config: ProbeSection) -> Trace:
    """A generated trace: the model's own completion of `prompt_ids`, split around its chain."""
    ids = _strip_trailing_special(tokenizer, [int(t) for t in generation.token_ids])
    start, end = chain_span(tokenizer, ids, config.think_open, config.think_close)
    final = final_answer_of(generation.text, example.data_source)
    return Trace(
        key=key, index=example.index, data_source=example.data_source,
        ground_truth=dict(example.ground_truth),
        context_ids=[int(t) for t in prompt_ids] + ids[:start], chain_ids=ids[start:end],
        final_answer=final, final_correct=judge_completion(generation.text, example.ground_truth,
                                                           example.data_source),
        completion=generation.text,
    )


def generate_traces(engine: Engine, tokenizer: Any, items: Sequence[tuple[int, TaskExample]],
                    config: ProbeSection) -> list[Trace]:
    """One trace per `(key, example)`, all in one engine call (seeded by the first key)."""
    if not items:
        return []
    prompts = [encode_messages(tokenizer, ex.messages, config.chat_template) for _, ex in items]
    params = SamplingParams(n=1, temperature=config.trace_temperature,
                            max_new_tokens=config.trace_max_tokens, stop=(ANSWER_STOP,),
                            seed=derive_seed(config.seed, items[0][0], 1))
    generations = engine.generate(prompts, params)
    return [trace_from_generation(key, ex, prompt, gens[0], tokenizer, config)
            for (key, ex), prompt, gens in zip(items, prompts, generations, strict=True)]


# --- given traces -------------------------------------------------------------------------

CHAIN_FIELDS = ("chain_of_thought", "cot")
ANSWER_FIELDS = ("final_answer", "answer")
CONFIDENCE_FIELDS = ("stated_confidence", "confidence")


def _field(row: Mapping[str, Any], names: Sequence[str]) -> Any:
    for name in names:
        if row.get(name) is not None:
            return row[name]
    return None


def _stated_confidence(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        parsed = parse_confidence(value) if CONFIDENCE_OPEN in value else None
        if parsed is None:
            try:
                parsed = float(value)
            except ValueError:
                raise UserError(f"{where}: stated confidence {value!r} is not a number") from None
        value = parsed
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: stated confidence {value!r} is not a number")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise UserError(f"{where}: stated confidence {value} is not in [0, 1]")
    return float(value)


def _example_for(row: Mapping[str, Any], line: int, by_index: Mapping[int, TaskExample],
                 examples: Sequence[TaskExample], where: str) -> TaskExample | None:
    if "index" in row:
        if row["index"] in by_index:
            return by_index[row["index"]]
        if row.get("ground_truth") is None:
            raise UserError(f"{where}: no example with index {row['index']!r} in the data")
        return None
    if row.get("ground_truth") is None:
        if line >= len(examples):
            raise UserError(f"{where}: no ground_truth, no index, and the data has only "
                            f"{len(examples)} rows")
        return examples[line]
    return None


def given_trace(row: Any, line: int, examples: Sequence[TaskExample],
                by_index: Mapping[int, TaskExample], tokenizer: Any, config: ProbeSection,
                where: str) -> Trace:
    """A trace from one parsed line of a traces file (see `read_given_traces`)."""
    if not isinstance(row, Mapping):
        raise UserError(f"{where}: expected a JSON object")
    if "index" in row and (isinstance(row["index"], bool) or not isinstance(row["index"], int)):
        raise UserError(f"{where}: index {row['index']!r} is not an integer")
    chain = _field(row, CHAIN_FIELDS)
    if not isinstance(chain, str):
        raise UserError(f"{where}: needs the chain of thought as a string in 'chain_of_thought'")
    example = _example_for(row, line, by_index, examples, where)
    data_source = row.get("data_source") or (example.data_source if example else DEFAULT_TASK)
    try:
        task = get_task(data_source)  # an unknown source fails here, with its name
    except UserError as err:
        raise UserError(f"{where}: {err}") from None
    ground_truth = row.get("ground_truth") or (example.ground_truth if example else None)
    if row.get("ground_truth") is not None:
        try:
            ground_truth = task.check_ground_truth(ground_truth)
        except UserError as err:
            raise UserError(f"{where}: {err}") from None
    prompt = row.get("prompt")
    if prompt is None:
        if example is None:
            raise UserError(f"{where}: no prompt and no matching example in the data")
        prompt = example.messages
    if isinstance(prompt, (str, list)) and not prompt:
        # An empty chat cannot be templated, and no prompt at all gives the chain no problem.
        raise UserError(f"{where}: 'prompt' is empty")
    if isinstance(prompt, str):
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        opened = prompt.rstrip().endswith(config.think_open)
    elif isinstance(prompt, list) and all(
            isinstance(m, Mapping) and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str) for m in prompt):
        prompt_ids = encode_messages(tokenizer, prompt, config.chat_template)
        opened = False
    else:
        raise UserError(f"{where}: 'prompt' must be a string or a list of chat messages "
                        "with string 'role' and 'content'")
    head = [] if opened else tokenizer(config.think_open, add_special_tokens=False)["input_ids"]
    answer = _field(row, ANSWER_FIELDS)
    if answer is not None and not isinstance(answer, str):
        answer = str(answer)
    final = (final_answer_of(answer, data_source) if answer and ANSWER_OPEN in answer
             else (answer.strip() or None) if answer else None)
    final_correct = final is not None and judge(f"{ANSWER_OPEN}{final}{ANSWER_CLOSE}", ground_truth,
                                                data_source)
    return Trace(
        key=line, index=int(row.get("index", example.index if example else line)),
        data_source=data_source, ground_truth=dict(ground_truth),
        context_ids=[int(t) for t in prompt_ids] + list(head),
        chain_ids=list(tokenizer(chain.rstrip(), add_special_tokens=False)["input_ids"]),
        final_answer=final, final_correct=final_correct,
        stated_confidence=_stated_confidence(_field(row, CONFIDENCE_FIELDS), where),
    )


def read_given_traces(path: str | Path, examples: Sequence[TaskExample], tokenizer: Any,
                      config: ProbeSection, after: int = -1) -> Iterator[Trace]:
    """Stream the traces of a JSON-lines file, one JSON object a line:

        chain_of_thought (or cot)     the text between the think tags (required)
        final_answer (or answer)      the trace's answer: the equation, or text with answer tags
        stated_confidence (or confidence)  a number in [0, 1], or text with confidence tags
        prompt                        a string (used as is) or chat messages; default: the
                                      matching example's messages
        index                         the data example it answers (default: the line number)
        ground_truth, data_source     default: the matching example's

    A trace's key is its 0-based line number; blank lines are skipped but counted. Lines up to
    `after` are not parsed (resuming), and only the first `config.limit` traces are read.
    """
    path = require_file(path)
    by_index: dict[int, TaskExample] = {}
    for ex in examples:
        by_index.setdefault(ex.index, ex)
    seen = 0
    for line, text in _lines(path):
        if not text.strip():
            continue
        seen += 1
        if config.limit is not None and seen > config.limit:
            return
        if line <= after:
            continue
        where = f"{path} line {line + 1}"
        try:
            row = json.loads(text)
        except json.JSONDecodeError as err:
            raise UserError(f"{where}: not JSON ({err.msg})") from None
        except ValueError as err:  # an integer over Python's 4,300-digit conversion limit
            raise UserError(f"{where}: {err}".split(";")[0]) from None
        yield given_trace(row, line, examples, by_index, tokenizer, config, where)


def check_given_traces(path: str | Path) -> int:
    """The number of traces in a traces file; `UserError` when it is missing or holds none (a
    probe of nothing would report "probed 0 traces" as if it had done its work)."""
    total, _ = count_given_traces(require_file(path))
    if not total:
        raise no_rows(path, "traces")
    return total


def count_given_traces(path: str | Path, after: int = -1) -> tuple[int, int]:
    """Non-blank lines of a traces file: in all, and up to line `after` (progress bar)."""
    total = done = 0
    for line, text in _lines(Path(path)):
        if text.strip():
            total += 1
            done += line <= after
    return total, done


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(0-based number, text) of each line; `UserError` if the file is not UTF-8 text."""
    try:
        with path.open(encoding="utf-8") as fh:
            yield from enumerate(fh)
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text ({err.reason})") from None


def chain_text(tokenizer: Any, trace: Trace) -> str:
    return decode(tokenizer, trace.chain_ids)
