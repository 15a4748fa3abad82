"""`train_layers`: only the top decoder blocks (and the final norm) train, with or without LoRA."""

from __future__ import annotations

import pytest
import torch

from calibrl.errors import UserError
from calibrl.models import build_tiny_model, build_tokenizer
from calibrl.models.adapters import decoder_blocks, prepare_policy, trainable_parameters
from calibrl.settings.sections import LoraSection

LAYERS = 4


@pytest.fixture()
def model():
    return build_tiny_model(build_tokenizer(), num_layers=LAYERS, hidden_size=32, num_heads=2)


def _block_of(name: str) -> int | None:
    parts = name.split(".")
    return int(parts[parts.index("layers") + 1]) if "layers" in parts else None


@pytest.mark.parametrize("top", [1, 3])
def test_only_the_top_blocks_and_the_final_norm_train(model, top):
    prepare_policy(model, train_layers=top)
    for name, param in model.named_parameters():
        block = _block_of(name)
        want = (block is not None and block >= LAYERS - top) or name.endswith("model.norm.weight")
        assert param.requires_grad == want, name


def test_the_backward_pass_leaves_frozen_weights_without_a_gradient(model):
    prepare_policy(model, train_layers=2)
    ids = torch.randint(0, model.config.vocab_size, (2, 6))
    model(input_ids=ids, labels=ids).loss.backward()
    for name, param in model.named_parameters():
        assert (param.grad is not None) == param.requires_grad, name
    trained = {id(p) for p in trainable_parameters(model)}
    assert trained == {id(p) for p in model.parameters() if p.requires_grad}


def test_without_train_layers_every_weight_trains(model):
    prepare_policy(model)
    assert all(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("bad", [0, LAYERS + 1])
def test_a_count_outside_the_blocks_is_one_clear_error(model, bad):
    with pytest.raises(UserError, match=f"train_layers must be in 1..{LAYERS}"):
        prepare_policy(model, train_layers=bad)


def test_a_model_without_decoder_blocks_is_one_clear_error():
    with pytest.raises(UserError, match="train_layers needs a decoder"):
        decoder_blocks(torch.nn.Linear(2, 2))


def test_lora_with_train_layers_adapts_only_the_top_blocks(model):
    pytest.importorskip("peft")
    peft_model = prepare_policy(model, lora=LoraSection(r=2, alpha=4), train_layers=1)
    trained = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n for n in trained)
    assert {_block_of(n) for n in trained} == {LAYERS - 1}
