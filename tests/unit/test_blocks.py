"""The shared block's Llama-style options, each against transformers' own module: RMSNorm, a
gated feed-forward block, no bias, grouped K/V heads; and the options it refuses."""

import pytest
import torch
from families import randomise

from attention import ConfigError, ModelConfig, Transformer
from attention.models.blocks import Block, make_norm

LLAMA_LIKE = dict(
    vocab_size=50,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=40,
    max_position_embeddings=64,
    hidden_act="silu",
    layer_norm_eps=1e-6,
    type_vocab_size=0,
    pad_token_id=None,
    norm="rms_norm",
    gated_mlp=True,
    attention_bias=False,
    mlp_bias=False,
    num_key_value_heads=2,
    embedding_norm=False,
    pre_norm=True,
    final_norm=True,
    causal=True,
    model_type="llama-like",
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_is_llamas(dtype):
    """The mean of squares in float32, the normalised x cast back before the weight multiplies it: transformers'
    LlamaRMSNorm's numbers to the bit in float32 and in bfloat16 (where torch's F.rms_norm, weighting before the
    cast, differs by a rounding step)."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    ours, theirs = make_norm(ModelConfig(**LLAMA_LIKE), 64), LlamaRMSNorm(64, eps=1e-6)
    randomise(ours, std=0.5)
    theirs.weight.data.copy_(ours.weight)
    ours, theirs = ours.to(dtype), theirs.to(dtype)
    x = (torch.randn(3, 7, 64) * 3).to(dtype)
    assert torch.equal(ours(x), theirs(x))


def test_residual_dropout_runs_in_training_only():
    """In evaluation the residual dropout is not called at all (a writing step makes two per layer); in training
    it drops."""
    block = Block(ModelConfig(**{**LLAMA_LIKE, "hidden_dropout_prob": 0.5}))
    x = torch.randn(2, 5, 32)
    block.train()
    assert (block.drop(torch.ones(4, 100)) == 0).any()
    block.eval()
    block.dropout = Refuse()
    assert block.drop(x) is x
    assert block(x, None)[0] is not None


class Refuse(torch.nn.Module):
    def forward(self, x):
        raise AssertionError("called in evaluation")


def test_gated_feed_forward_is_llamas():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    block = Block(ModelConfig(**LLAMA_LIKE))
    randomise(block, std=0.3)
    theirs = LlamaMLP(LlamaConfig(hidden_size=32, intermediate_size=40, hidden_act="silu", mlp_bias=False))
    theirs.load_state_dict(
        {
            "gate_proj.weight": block.gate.weight,
            "up_proj.weight": block.intermediate.weight,
            "down_proj.weight": block.output.weight,
        }
    )
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(block.feed_forward(x), theirs(x), atol=1e-6, rtol=0)


def test_no_bias_grouped_pre_norm_causal_model_runs():
    model = Transformer(ModelConfig(**LLAMA_LIKE)).eval()
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    assert model.layers[0].attention.num_kv_heads == 2 and model.layers[0].attention.k_proj.out_features == 16
    with torch.no_grad():
        out = model(torch.randint(0, 50, (2, 7)), torch.tensor([[1] * 7, [1] * 5 + [0] * 2]))
    assert len(out.hidden_states) == 3 and out.attentions[1].shape == (2, 4, 7, 7)
    assert torch.all(out.attentions[0].triu(diagonal=1) == 0)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(norm="batch_norm"), "norm 'batch_norm'"),
        (dict(num_key_value_heads=3), "not divisible by num_key_value_heads"),
        (dict(position_embedding_type="alibi"), "alibi"),
        (dict(rope_type="longrope"), "rope_scaling type .longrope."),
        (dict(pre_norm=1), "pre_norm should be a bool"),
    ],
)
def test_undeclared_options_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**{**LLAMA_LIKE, **change})


def test_embedding_tables_are_random_on_the_cpu_and_left_empty_on_meta():
    from attention.models.parts import embedding_table

    torch.manual_seed(0)
    table = embedding_table(50, 16, padding_idx=3)
    assert table.weight.requires_grad and table.padding_idx == 3
    assert torch.all(table.weight[3] == 0) and 0.8 < table.weight.std().item() < 1.2  # as torch initialises
    with torch.device("meta"):
        assert embedding_table(10**9, 4096).weight.device.type == "meta"  # no data, whatever the size


def test_loading_does_not_pay_for_initialising_meta_tensors():
    """normal_ on a meta tensor imports torch._dynamo (about a second at every start): the checks before
    building and the build itself must not call it."""
    import subprocess
    import sys

    code = "import sys, attention; attention.load_model(None); print('torch._dynamo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
