"""The tiny model's size bound: the count it checks is the real one, and huge configs are refused."""

import pytest

from calibrl.errors import UserError
from calibrl.models.sizes import MAX_PARAMETERS, TinyModelSizes
from calibrl.models.tiny import build_tiny_model, count_parameters
from calibrl.models.tokenizer import build_tokenizer


@pytest.mark.parametrize("sizes", [
    {"hidden_size": 32, "num_layers": 1, "num_heads": 2},
    {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2,
     "intermediate_size": 100, "tie_embeddings": False},
])
def test_parameter_count_is_the_built_models(sizes):
    tokenizer = build_tokenizer()
    model = build_tiny_model(tokenizer, **sizes)
    assert TinyModelSizes(**sizes).parameters(len(tokenizer)) == count_parameters(model)


@pytest.mark.parametrize("sizes", [
    {"hidden_size": 65536, "num_heads": 1},
    {"hidden_size": 4096, "num_layers": 64, "num_heads": 32},  # ~12.9e9 parameters
    {"max_position_embeddings": 10**12},
])
def test_huge_configs_are_refused_before_building(sizes):
    with pytest.raises(UserError, match="limit of"):
        TinyModelSizes(**sizes)


def test_the_bound_itself_is_allowed():
    # 24 layers at hidden 1792 with a 3x MLP: just over 1e9 parameters; 23 layers are under.
    assert TinyModelSizes(hidden_size=1792, num_layers=23, num_heads=14).parameters() <= (
        MAX_PARAMETERS)
    with pytest.raises(UserError, match="1,009,342,208 parameters"):
        TinyModelSizes(hidden_size=1792, num_layers=24, num_heads=14)
