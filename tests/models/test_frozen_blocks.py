"""Reading the frozen lower blocks once: the split forward (lower blocks, then the rest from
their states) gives the full forward's logits, and says so only where it does."""

from __future__ import annotations

import pytest
import torch

from calibrl.models import build_tiny_model, build_tokenizer
from calibrl.models.frozen_blocks import (
    blocks_only,
    lower_states,
    matches_full_forward,
    padded,
    splittable,
    upper_logits,
)

LAYERS = 4


@pytest.fixture()
def model():
    return build_tiny_model(build_tokenizer(), num_layers=LAYERS, hidden_size=32,
                            num_heads=2).eval()


def right_padded_batch(vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(3, vocab, (3, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    return ids, mask


@pytest.mark.parametrize("frozen", [1, 3])
def test_the_split_forward_gives_the_full_forwards_logits(model, frozen):
    ids, mask = right_padded_batch(model.config.vocab_size)
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask).logits  # [B, T, V]
        states = lower_states(model, ids, mask, frozen)  # [B, T, H]
        split = upper_logits(model, states, mask, frozen, 0)
        tail = upper_logits(model, states, mask, frozen, 5)
    assert states.shape == (3, 9, 32)
    kept = mask.bool()
    torch.testing.assert_close(split[kept], full[kept], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tail[kept[:, 5:]], full[:, 5:][kept[:, 5:]], rtol=1e-5, atol=1e-5)
    assert matches_full_forward(model, ids, mask, frozen)


def test_the_split_is_refused_where_forward_changes_its_inputs(model):
    # As older Gemma code did: a decoder that rescales inputs_embeds inside its forward, so
    # states fed back that way are not what its block saw.
    def rescale(_module, args, kwargs):
        if kwargs.get("inputs_embeds") is not None and kwargs.get("input_ids") is None:
            kwargs["inputs_embeds"] = kwargs["inputs_embeds"] * 2.0
        return args, kwargs

    ids, mask = right_padded_batch(model.config.vocab_size)
    assert splittable(model) and matches_full_forward(model, ids, mask, 2)
    model.get_decoder().register_forward_pre_hook(rescale, with_kwargs=True)
    assert not matches_full_forward(model, ids, mask, 2)


def test_a_decoder_without_blocks_in_layers_is_not_split():
    assert not splittable(torch.nn.Linear(2, 2))


def test_gradients_reach_only_the_blocks_above_the_split(model):
    ids, mask = right_padded_batch(model.config.vocab_size)
    states = lower_states(model, ids, mask, 2)
    upper_logits(model, states, mask, 2, 4).sum().backward()
    for name, param in model.named_parameters():
        if "layers." in name:  # (the embeddings are the tied output head: they get one)
            assert (param.grad is None) == any(f"layers.{i}." in name for i in range(2)), name


def test_the_blocks_come_back_after_the_split_and_on_error(model):
    blocks = list(model.get_decoder().layers)
    with blocks_only(model, 1, 3):
        assert list(model.get_decoder().layers) == blocks[1:3]
    with pytest.raises(RuntimeError), blocks_only(model, 2):
        raise RuntimeError("stop")
    assert list(model.get_decoder().layers) == blocks


def test_padded_right_pads_with_zeros():
    rows = [torch.ones(2, 3), 2 * torch.ones(4, 3)]
    out = padded(rows, 5)
    assert out.shape == (2, 5, 3)
    assert out[0, :2].eq(1).all() and out[0, 2:].eq(0).all()
    assert out[1, :4].eq(2).all() and out[1, 4:].eq(0).all()
