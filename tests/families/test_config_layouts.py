"""A checkpoint's config.json in each layout real checkpoints use: transformers 5 writes the rotary settings as
`rope_parameters` (per layer kind for Gemma3 and ModernBERT) and the layer kinds as `layer_types`, while checkpoints
saved before it say `rope_theta` and `rope_scaling`, Gemma3's `rope_local_base_freq` and `sliding_window_pattern`,
ModernBERT's `global_rope_theta` and `local_rope_theta`, GPT-NeoX's `rotary_pct` and `rotary_emb_base`, Phi's
`partial_rotary_factor` at the top level, Qwen2's `max_window_layers`. transformers rewrites the older keys into the
newer ones when it saves, so each case here saves a tiny random checkpoint, copies it and writes the copy's
config.json by hand in the older layout; our model read from it must be the one read from the newer layout and give
transformers' eager numbers on the same file."""

from __future__ import annotations

import json
import shutil

import pytest
import test_decoders
from families import DECODERS, make_family, make_more
from parity import PARITY_KINDS

from attention import load_model

LLAMA3 = dict(factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=16)
GEMMA3_UNSCALED = dict(
    rope_parameters=dict(
        full_attention=dict(rope_type="default", rope_theta=1000.0),
        sliding_attention=dict(rope_type="default", rope_theta=50.0),
    )
)
THETA_100 = dict(rope_parameters=dict(rope_type="default", rope_theta=100.0))
# id -> (family, the checkpoint's overrides, keys the older layout leaves out, what it says instead); every base
# differs from its family's default and every windowed layers' base from the full layers', so a key read wrong shows
CASES = {
    "gemma3": (  # gemma-3-4b's text config: a linear-scaled full base, the windowed layers' own
        "gemma3_text",
        {},
        ("rope_parameters",),
        dict(rope_theta=1000.0, rope_local_base_freq=50.0, rope_scaling=dict(rope_type="linear", factor=2.0)),
    ),
    "gemma3-pattern": (  # gemma-3-1b's: unscaled, the layer kinds as every sliding_window_pattern-th layer full
        "gemma3_text",
        GEMMA3_UNSCALED,
        ("rope_parameters", "layer_types", "_sliding_window_pattern"),
        dict(rope_theta=1000.0, rope_local_base_freq=50.0, rope_scaling=None, sliding_window_pattern=3),
    ),
    "modernbert": (  # ModernBERT-base's: every global_attn_every_n_layers-th layer full, from layer 0
        "modernbert",
        {},
        ("rope_parameters", "layer_types"),
        dict(global_rope_theta=1000.0, local_rope_theta=30.0),
    ),
    "llama3": (  # Llama-3.1's rope_scaling
        "llama",
        dict(rope_parameters=dict(rope_type="llama3", rope_theta=500.0, **LLAMA3)),
        ("rope_parameters",),
        dict(rope_theta=500.0, rope_scaling=dict(rope_type="llama3", **LLAMA3)),
    ),
    "llama-linear": (  # Llama-2-era fine-tunes: the scaling's kind under "type"
        "llama",
        dict(rope_parameters=dict(rope_type="linear", rope_theta=500.0, factor=2.0)),
        ("rope_parameters",),
        dict(rope_theta=500.0, rope_scaling=dict(type="linear", factor=2.0)),
    ),
    "mistral": ("mistral", THETA_100, ("rope_parameters",), dict(rope_theta=100.0)),
    "qwen2-window": (  # the windowed layers from max_window_layers on (1 and 2 of 3, not the last one), no layer_types
        "qwen2",
        dict(THETA_100, use_sliding_window=True, sliding_window=5, max_window_layers=1, num_hidden_layers=3),
        ("rope_parameters", "layer_types"),
        dict(rope_theta=100.0),
    ),
    "qwen3": ("qwen3", THETA_100, ("rope_parameters", "layer_types"), dict(rope_theta=100.0)),
    "olmo2": ("olmo2", THETA_100, ("rope_parameters",), dict(rope_theta=100.0)),
    "gemma": ("gemma", THETA_100, ("rope_parameters",), dict(rope_theta=100.0)),
    "gemma2": ("gemma2", THETA_100, ("rope_parameters", "layer_types"), dict(rope_theta=100.0)),
    "phi": (  # phi-2's: the rotated share and base at the top level
        "phi",
        dict(rope_parameters=dict(rope_theta=100.0, partial_rotary_factor=0.25)),
        ("rope_parameters",),
        dict(rope_theta=100.0, partial_rotary_factor=0.25),
    ),
    "phi3": (  # Phi-4-mini's keys, unscaled
        "phi3",
        {},
        ("rope_parameters",),
        dict(rope_theta=100.0, partial_rotary_factor=0.5, rope_scaling=None),
    ),
    "gpt_neox": ("gpt_neox", {}, ("rope_parameters",), dict(rotary_emb_base=100.0, rotary_pct=0.5)),  # Pythia's
}


@pytest.fixture(scope="module")
def load(tmp_path_factory):
    """load(case) -> (our model from the newer layout, ours from the older, its tokenizer, transformers' eager
    base model from the older, transformers' config from the newer), each case built once."""
    from transformers import AutoConfig, AutoModel

    built = {}

    def load_case(case: str):
        if case not in built:
            family, overrides, dropped, older = CASES[case]
            make = make_family if family in DECODERS else make_more
            newer = make(tmp_path_factory.mktemp(case), family, **overrides)
            folder = tmp_path_factory.mktemp(case + "-older") / "checkpoint"
            shutil.copytree(newer, folder)
            values = json.loads((newer / "config.json").read_text())
            assert all(key in values for key in dropped), (case, sorted(values))  # the newer layout says them
            values = {k: v for k, v in values.items() if k not in dropped}
            (folder / "config.json").write_text(json.dumps({**values, **older}))
            model, tokenizer = load_model(folder)
            theirs = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
            built[case] = (load_model(newer)[0], model, tokenizer, theirs, AutoConfig.from_pretrained(str(newer)))
        return built[case]

    return load_case


@pytest.mark.parametrize("case", list(CASES))
def test_the_older_layout_reads_as_the_newer(load, case):
    """Every field of our config read from the older keys is the one read from rope_parameters (the layer kinds
    alike, however the pattern is counted: one full layer in three), and the file
    written by hand says what the saved one says as transformers reads it (the case tests what it claims to)."""
    newer, older, _, theirs, their_newer = load(case)
    windows = [newer.config.window_of(i) for i in range(newer.config.num_hidden_layers)]
    assert [older.config.window_of(i) for i in range(older.config.num_hidden_layers)] == windows
    pattern = dict(
        sliding_window_pattern=newer.config.attention.sliding_window_pattern,
        first_full_layer=newer.config.attention.first_full_layer,
    )
    assert older.config.replace(**pattern) == newer.config, (case, older.config, newer.config)
    parameters = theirs.config.rope_parameters
    if "type" in parameters:  # transformers keeps the older key beside the one it adds: the same kind
        parameters = {k: v for k, v in parameters.items() if k != "type"}
    assert parameters == their_newer.rope_parameters
    assert getattr(theirs.config, "layer_types", None) == getattr(their_newer, "layer_types", None)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("kind", PARITY_KINDS)
def test_parity_with_transformers_on_the_older_layout(load, case, kind):
    _, model, tokenizer, theirs, _ = load(case)
    input_ids, attention_mask = test_decoders.inputs(tokenizer, kind)
    hidden, attention = test_decoders.differences(model, theirs, input_ids, attention_mask)
    print(f"\n{case:16} {kind:13} max|Δ hidden| {hidden:.2e}  max|Δ maps| {attention:.2e}")
    assert hidden <= 1e-5 and attention <= 1e-6, (case, kind, hidden, attention)
