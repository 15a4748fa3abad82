"""The cache argument calibrl hands a transformers model: by the name the installed version reads.

These fail where transformers changes its cache API again: a deprecated name warns (an error
here), and a name the model does not read leaves the cache empty.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from transformers import DynamicCache

from calibrl.rollout import kv_cache


def _forward_quietly(model, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a FutureWarning about the argument's name fails here
        return model(**kwargs)


def test_the_cache_argument_fills_the_cache_without_a_warning(model, prompts):
    ids = torch.tensor([prompts[0]])
    cache = DynamicCache()
    _forward_quietly(model, input_ids=ids, **kv_cache.with_cache(model, cache), use_cache=True)
    assert cache.get_seq_length() == ids.shape[1]


def test_prefill_then_a_step_equals_one_forward_pass(model, prompts):
    ids = prompts[1]
    kv = kv_cache.prefill(model, ids[:-1])
    cache, mask = kv_cache.rows_from_prefix(kv, [len(ids) - 1], torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step, _ = kv_cache.decode_step(model, cache, mask, torch.tensor([len(ids) - 1]),
                                       torch.tensor([ids[-1]]))
    whole = model(input_ids=torch.tensor([ids])).logits[0, -1]
    torch.testing.assert_close(step[0], whole, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("depth", [1, 2])
def test_a_wrapper_taking_kwargs_gets_the_installed_versions_name(model, prompts, depth):
    class Wrapper(torch.nn.Module):  # DDP or peft: forward(*args, **kwargs) to the model
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args, **kwargs):
            return self.inner(*args, **kwargs)

    outer = model
    for _ in range(depth):
        outer = Wrapper(outer)
    cache = DynamicCache()
    ids = torch.tensor([prompts[2]])
    _forward_quietly(outer, input_ids=ids, **kv_cache.with_cache(outer, cache), use_cache=True)
    assert cache.get_seq_length() == ids.shape[1]
