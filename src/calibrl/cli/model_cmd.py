"""`calibrl model ...`: build the tiny model family calibrl trains on CPU."""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.models.sizes import TinyModelSizes

app = typer.Typer(
    help="The tiny model calibrl builds itself (no downloads).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_DEFAULT = TinyModelSizes()


@app.callback()
def _group() -> None:
    """The tiny model calibrl builds itself (no downloads)."""
    # A callback keeps `init` a subcommand even while it is the group's only command.


@app.command("init")
def init(
    out: Path = typer.Option(..., "--out", help="Folder to write the model and tokenizer into."),
    hidden_size: int = typer.Option(_DEFAULT.hidden_size, help="Width of the residual stream."),
    num_layers: int = typer.Option(_DEFAULT.num_layers, help="Number of transformer blocks."),
    num_heads: int = typer.Option(_DEFAULT.num_heads, help="Attention heads per block."),
    num_kv_heads: int | None = typer.Option(
        _DEFAULT.num_kv_heads, help="Key/value heads (default: as many as attention heads)."
    ),
    intermediate_size: int | None = typer.Option(
        _DEFAULT.intermediate_size, help="MLP width (default: 3 x hidden size)."
    ),
    max_positions: int = typer.Option(
        _DEFAULT.max_position_embeddings, help="Longest sequence, prompt plus response."
    ),
    tie_embeddings: bool = typer.Option(
        _DEFAULT.tie_embeddings, help="Share the input embedding and output matrix."
    ),
    seed: int = typer.Option(0, help="Seed of the weight initialisation."),
    overwrite: bool = typer.Option(False, help="Write into a folder that is not empty."),
) -> None:
    """Create a freshly initialised model + tokenizer loadable with `from_pretrained`."""
    # Imported here so `calibrl --help` does not pay for transformers.
    from calibrl.models.tiny import count_parameters, create_tiny_model

    path = create_tiny_model(
        out,
        seed=seed,
        overwrite=overwrite,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_positions,
        tie_embeddings=tie_embeddings,
    )
    # Loading it back both counts the parameters and proves the folder loads.
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path)
    typer.echo(
        f"wrote {path}: {count_parameters(model):,} parameters, "
        f"vocabulary {model.config.vocab_size}"
    )
