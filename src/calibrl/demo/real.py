"""The real-model demo (`calibrl demo --config configs/demo_real.yaml`): a pretrained chat model
(SmolLM2-135M-Instruct, `make smollm2`) learns to say what it knows about the world.

    data/{train,test,held_out,format,rl,recalibration}.parquet   eval-zero-shot/   sft/model/
    eval-before/   calibrate/model/   eval-calibrated/   rl/<run>/   eval-after/   eval-held-out/
    eval-recalibration/   eval-after-recalibrated/   eval-held-out-recalibrated/   report.md

1. data: `calibrl data world-facts` (capitals, continents, currencies, cities' countries, US
   state capitals, element symbols and names), split by entity; `data.hold_out_type` goes to
   held_out.parquet, asked in no stage before the last evaluation. The training split gives the
   format warm-up's questions and, disjoint from them, the RL prompts and the recalibration
   questions (or, with `data.recalibration_split: entities`, those come from a third split by
   entity).
2. the model as it comes, two turns (`eval-zero-shot`): it answers in sentences and writes no
   tags, so beside the strict accuracy the short-answer task reports `lenient_accuracy` (an
   accepted answer named anywhere), the reading every later stage is compared with;
3. a format warm-up that teaches no fact (`training.own_replies`): the model answers the bare
   format questions, its replies are rewritten into the answer tags, and `calibrl sft` (the top
   blocks, `sft.train_layers`) trains on them and on the turn-2 format;
4. the confidence warm-up on its own graded answers to the RL prompts (`calibrl calibrate`);
5. two-turn RLCR (`calibrl train`);
6. an evaluation after each stage on the test split, and of the final model on the held-out type;
7. with `data.recalibration_prompts`, the final model's answers to more training questions fit a
   Platt map of its stated value (`evaluation.recalibration`), and the final evaluations are
   written again through it, reported beside the stated value.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field
from rich.console import Console

from calibrl.errors import UserError
from calibrl.settings.base import Section
from calibrl.settings.demo import DemoStages
from calibrl.tasks.short_answer.world_split import RECALIBRATION  # its evaluation's name too

REAL_RECIPE = "real"  # the value of `recipe:` that marks a real-model recipe
HELD_OUT_EVAL = "eval-held-out"
RECALIBRATED = {"eval-after": "eval-after-recalibrated",
                HELD_OUT_EVAL: f"{HELD_OUT_EVAL}-recalibrated"}


class RealDataSection(Section):
    """The world facts (as `calibrl data world-facts`) and the training split's two uses."""

    test_fraction: float = Field(gt=0, lt=1, description="Share of the questions in the test "
                                 "split, at most (entities linked by a question stay on one "
                                 "side).")
    types: tuple[str, ...] | None = Field(None, description="Fact types asked (None: all).")
    hold_out_type: tuple[str, ...] = Field((), description="Fact types asked in no stage: the "
                                           "final model is evaluated on them alone.")
    min_city_population: int = Field(ge=0, description="Cities asked about have at least "
                                     "this many people.")
    cities_per_country: int = Field(ge=0, description="At most this many cities of one "
                                    "country.")
    format_prompts: int = Field(gt=0, description="Training questions the format warm-up asks "
                                "the model (its replies become the warm-up's rows).")
    rl_prompts: int = Field(gt=0, description="Other training questions: the confidence "
                            "warm-up's and RL's prompts.")
    recalibration_prompts: int = Field(0, ge=0, description="Questions asked of the final "
                                       "model alone: its answers fit a Platt map of the stated "
                                       "value (`evaluation.recalibration`), reported beside the "
                                       "stated value on the test and held-out answers; 0: "
                                       "none.")
    recalibration_split: Literal["training", "entities"] = Field(
        "training", description="Where the recalibration questions come from: 'training', "
        "training questions no stage asks (their entities may be named by the format or RL "
        "questions); 'entities', a third split taken by entity as the test split is, as large "
        "as it, so no stage trains on any entity they name.")


class FormatSection(Section):
    """How the model's own replies to the format questions are sampled."""

    max_new_tokens: int = Field(gt=0, description="Longest reply; a reply is read by name.")
    temperature: float = Field(ge=0, description="0: its most likely reply.")
    think: bool = Field(False, description="Keep the reply, cut after the value it names, as "
                        "the think step before the answer, so the answer is a name copied from "
                        "the model's own sentence whatever the question's kind (False: an "
                        "empty think block).")


class RealDemoSettings(DemoStages):
    """data -> the model as it comes -> format warm-up -> confidence warm-up -> two-turn RLCR,
    evaluated after each, and on a held-out fact type at the end."""

    SEEDED_STAGES: ClassVar[tuple[str, ...]] = ("sft", "calibrate", "eval", "rl")

    recipe: Literal["real"] = Field(description="Which demo the recipe runs: 'real'.")
    model: str = Field(description="The pretrained model: a folder (`make smollm2` writes "
                       "models/smollm2-135m-instruct) or a Hugging Face Hub id.")
    data: RealDataSection = Field(description="The world facts and their splits.")
    format: FormatSection = Field(description="The format warm-up's own replies.")


def is_real_recipe(tree: Mapping[str, Any]) -> bool:
    return tree.get("recipe") == REAL_RECIPE


def stage_world_data(settings: RealDemoSettings, console: Console) -> dict[str, int]:
    """Write the splits and the training split's format questions and RL prompts; print the
    counts per type and group."""
    from calibrl.tasks.files import write_splits
    from calibrl.tasks.short_answer.world_split import world_splits
    from calibrl.tasks.short_answer.world_types import parse_types

    data = settings.data
    by_entity = data.recalibration_split == "entities"
    rows, table = world_splits(parse_types(data.types), data.hold_out_type, seed=settings.seed,
                               test_fraction=data.test_fraction,
                               recalibration_fraction=data.test_fraction if by_entity else 0.0,
                               min_city_population=data.min_city_population,
                               cities_per_country=data.cities_per_country)
    console.print(table, markup=False)
    train = rows["train"]  # in an order whose every prefix keeps each group's share
    rows["format"] = train[:data.format_prompts]
    used = data.format_prompts + data.rl_prompts
    rows["rl"] = train[data.format_prompts:used]
    pool = rows.pop(RECALIBRATION, []) if by_entity else train[used:]
    if data.recalibration_prompts and pool:
        rows[RECALIBRATION] = pool[:data.recalibration_prompts]
    write_splits(Path(settings.out_dir) / "data", rows)
    counts = {name: len(split) for name, split in rows.items()}
    console.print(", ".join(f"{name} {n}" for name, n in counts.items()))
    return counts


def stage_format(settings: RealDemoSettings, console: Console) -> Path:
    """The model's own replies to the format questions, rewritten into the tags, then SFT."""
    from calibrl.models.loading import load_policy, resolve_model_path
    from calibrl.rollout.factory import make_engine
    from calibrl.settings import SFTSettings
    from calibrl.tasks.files import load_examples, write_examples
    from calibrl.training.own_replies import own_reply_rows
    from calibrl.training.sft_run import run_sft

    out = Path(settings.out_dir)
    model_path = resolve_model_path(settings.model, out)
    model, tokenizer = load_policy(model_path)
    engine = make_engine("hf", model, tokenizer, decode=settings.eval.decode)
    rows, counts = own_reply_rows(
        engine, tokenizer, load_examples(out / "data/format.parquet"),
        known=load_examples(out / "data/train.parquet"),
        max_new_tokens=settings.format.max_new_tokens, temperature=settings.format.temperature,
        seed=settings.seed, think=settings.format.think)
    console.print(format_counts_line(counts))
    if not rows:
        raise UserError(f"none of the model's {sum(counts.values())} replies to the format "
                        "questions names an answer the training questions accept: nothing to "
                        "warm up on (is it a chat model that knows some of these facts?)")
    del engine, model
    write_examples(out / "data/sft.parquet", rows)
    held_out = [str(p) for p in (out / "data/test.parquet", out / "data/held_out.parquet")
                if p.is_file()]
    config = SFTSettings.create(**settings.sft.model_dump(), data=str(out / "data/sft.parquet"),
                                exclude=held_out, out=str(out / "sft"), model=model_path,
                                overwrite=True)
    result, _ = run_sft(config)
    return Path(result.model_dir)


def format_counts_line(counts: Counter) -> str:
    """How the replies read: named the right value, a wrong one, or none (left out)."""
    total = sum(counts.values()) or 1
    parts = [f"{kind} {counts[kind]} ({counts[kind] / total:.0%})"
             for kind in ("named right", "named wrong", "named none")]
    return "own replies to the format questions: " + ", ".join(parts)


STAGES = {"eval-zero-shot": "the model as it comes", "eval-before": "format warm-up",
          "eval-calibrated": "confidence warm-up", "eval-after": "then two-turn RLCR",
          "eval-after-recalibrated": "RLCR, recalibrated (Platt)",
          HELD_OUT_EVAL: "after RL, held-out fact type",
          f"{HELD_OUT_EVAL}-recalibrated": "held-out fact type, recalibrated (Platt)"}


REAL_HEADING = "The model as it comes, format warm-up, confidence warm-up, RL"


def real_stage_rows(results: Mapping[str, Mapping[str, Any]]) -> list[dict]:
    """The evaluations (by folder name) in stage order as rows of the comparison tables."""
    from calibrl.demo.report import stage_rows

    return stage_rows({label: results[key] for key, label in STAGES.items() if key in results})


def run_real_demo(settings: RealDemoSettings, timed: Any, console: Console
                  ) -> dict[str, dict[str, Any]]:
    """Every stage (each through `timed(name, fn)`); returns the evaluations by folder name."""
    from calibrl.demo.stages import describe_model, stage_calibrate, stage_eval, stage_rl

    out = Path(settings.out_dir)
    counts = timed("data", lambda: stage_world_data(settings, console))
    results: dict[str, dict[str, Any]] = {}

    def evaluate(name: str, model: Path | str, data: str = "test") -> None:
        results[name] = timed(f"evaluation: {STAGES[name]}",
                              lambda: stage_eval(settings, Path(model), name, data))

    evaluate("eval-zero-shot", settings.model)
    sft_model = timed("format warm-up", lambda: stage_format(settings, console))
    console.print(describe_model(sft_model))
    evaluate("eval-before", sft_model)
    rl_start = sft_model
    if settings.calibrate is not None and settings.calibrate.steps > 0:
        rl_start = timed("confidence warm-up", lambda: stage_calibrate(settings, sft_model))
        evaluate("eval-calibrated", rl_start)
    rl_model = timed("two-turn RLCR", lambda: stage_rl(settings, rl_start))
    evaluate("eval-after", rl_model)
    if (out / "data/held_out.parquet").is_file():
        evaluate(HELD_OUT_EVAL, rl_model, "held_out")
    if counts.get(RECALIBRATION):
        timed("evaluation: the final model on the recalibration questions",
              lambda: stage_eval(settings, rl_model, f"eval-{RECALIBRATION}", RECALIBRATION))
        results.update(timed("recalibration", lambda: stage_recalibrate(
            settings, console, [name for name in RECALIBRATED if name in results])))
    return results


def stage_recalibrate(settings: RealDemoSettings, console: Console, evaluated: Iterable[str]
                      ) -> dict[str, dict[str, Any]]:
    """A Platt map fitted on the final model's answers to the recalibration questions, and
    each of the final model's `evaluated` folders (keys of `RECALIBRATED`) written again
    through it, the map in its recalibration.json; returns their metrics by folder name."""
    import json

    from calibrl.evaluation.recalibration import fit_platt, reading_values, recalibrated_records
    from calibrl.evaluation.run import read_predictions, write_run

    out, reading = Path(settings.out_dir), settings.eval.confidence_reading
    confidence, correct = reading_values(read_predictions(out / f"eval-{RECALIBRATION}"),
                                         reading)
    if not confidence.size:
        console.print("recalibration: no answer to the recalibration questions has a stated "
                      "value to fit a map on; none written")
        return {}
    platt = fit_platt(confidence, correct)
    console.print(f"recalibration: a Platt map fitted on {platt.answers} answers to training "
                  f"questions no stage asked ({platt.rate:.0%} right): slope "
                  f"{platt.slope:.2f}, intercept {platt.intercept:.2f}")
    described = json.dumps({**platt.to_dict(), "reading": reading,
                            "fitted_on": f"eval-{RECALIBRATION}"}, indent=2) + "\n"
    results = {}
    for source in evaluated:
        target = RECALIBRATED[source]
        rows = recalibrated_records(read_predictions(out / source), platt, reading)
        results[target] = write_run(out / target, rows, settings.eval, target,
                                    extra_files={"recalibration.json": described})
    return results


def real_intro(settings: RealDemoSettings, results: Mapping[str, Mapping[str, Any]]) -> str:
    """The report's opening line."""
    held = ", ".join(settings.data.hold_out_type) or "none"
    first = next(iter(results.values()), {})
    return (f"{settings.model} on questions about the world (held-out fact type: {held}); "
            f"evaluation on {first.get('count')} answers ({settings.eval.samples} per held-out "
            f"question, temperature {settings.eval.temperature}, top-p {settings.eval.top_p})."
            "\n")
