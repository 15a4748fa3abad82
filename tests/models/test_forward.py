"""`logits_at` keeps, per row, the logits a full forward pass gives at that row's position."""

from __future__ import annotations

import pytest
import torch

from calibrl.models import build_tiny_model, build_tokenizer
from calibrl.models.forward import logits_at, logits_from


def test_each_row_gets_the_full_passs_logits_at_its_position():
    tokenizer = build_tokenizer(model_max_length=128)
    model = build_tiny_model(tokenizer, seed=0, hidden_size=32, num_layers=2,
                             num_heads=2).eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, tokenizer.vocab_size, (5, 12), generator=gen)  # [B, T]
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # a right-padded row
    positions = torch.tensor([11, 6, 0, 6, 3])  # repeats: one projection each
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask).logits  # [B, T, V]
        kept = logits_at(model, ids, mask, positions)  # [B, V]
    assert kept.shape == (5, full.shape[-1])
    for row, pos in enumerate(positions.tolist()):
        torch.testing.assert_close(kept[row], full[row, pos], rtol=1e-5, atol=1e-5)


def test_logits_from_a_start_are_the_full_passs_last_positions():
    tokenizer = build_tokenizer(model_max_length=128)
    model = build_tiny_model(tokenizer, seed=0, hidden_size=32, num_layers=1,
                             num_heads=2).eval()
    ids = torch.randint(3, tokenizer.vocab_size, (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask).logits  # [B, T, V]
        for start in (0, 4, 8):
            torch.testing.assert_close(logits_from(model, ids, mask, start), full[:, start:],
                                       rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="outside"):
        logits_from(model, ids, mask, 9)  # logits_to_keep=0 would mean every position
