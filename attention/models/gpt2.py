"""GPT-2: a causal decoder of pre-norm blocks with a final norm (ln_f), no token types.

Its linear layers are Conv1D, whose weights are stored (in, out): c_attn, attn.c_proj, mlp.c_fc
and mlp.c_proj are transposed on load, by name. c_attn is one projection to Q, K and V, kept
fused (qkv_proj) so that the shape flow shows the real split. The causal-mask buffers attn.bias
and attn.masked_bias of older checkpoints are skipped by name. Positions are 0, 1, 2 ... for
every row, padding or not, as transformers counts them when no position_ids are given.
"""

from __future__ import annotations

from ..config import ConfigError, ModelConfig
from .family import Family, config_values, integer

_NAMES = dict(
    vocab_size="vocab_size",
    hidden_size="n_embd",
    num_hidden_layers="n_layer",
    num_attention_heads="n_head",
    hidden_act="activation_function",
    hidden_dropout_prob="resid_pdrop",
    attention_probs_dropout_prob="attn_pdrop",
    max_position_embeddings="n_positions",
    layer_norm_eps="layer_norm_epsilon",
)
_DEFAULTS = dict(
    vocab_size=50257,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    hidden_act="gelu_new",
    max_position_embeddings=1024,
    layer_norm_eps=1e-5,
)
# settings that change the computation in ways this model does not follow, with the value it needs
_REQUIRED = dict(scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False, add_cross_attention=False)


def read_config(values: dict) -> ModelConfig:
    for key, needed in _REQUIRED.items():
        if values.get(key, needed) != needed:
            raise ConfigError(f"GPT-2 with {key}={values[key]!r} is not supported (only {needed})")
    fields = config_values(values, _NAMES, _DEFAULTS)
    inner = values.get("n_inner") or 4 * integer(fields, "hidden_size")
    return ModelConfig(
        **fields,
        intermediate_size=inner,
        model_type="gpt2",
        type_vocab_size=0,
        pad_token_id=None,
        embedding_norm=False,
        pre_norm=True,
        final_norm=True,
        causal=True,
        fused_qkv=True,
    )


_BLOCK = r"h\.(\d+)\."
RULES = (
    (r"wte\.weight", "embeddings.word_embeddings.weight"),
    (r"wpe\.weight", "embeddings.position_embeddings.weight"),
    (_BLOCK + r"ln_1\.(weight|bias)", r"layers.\1.attention_norm.\2"),
    (_BLOCK + r"attn\.c_attn\.(weight|bias)", r"layers.\1.attention.qkv_proj.\2"),
    (_BLOCK + r"attn\.c_proj\.(weight|bias)", r"layers.\1.attention.o_proj.\2"),
    (_BLOCK + r"ln_2\.(weight|bias)", r"layers.\1.output_norm.\2"),
    (_BLOCK + r"mlp\.c_fc\.(weight|bias)", r"layers.\1.intermediate.\2"),
    (_BLOCK + r"mlp\.c_proj\.(weight|bias)", r"layers.\1.output.\2"),
    (r"ln_f\.(weight|bias)", r"final_norm.\1"),
)

FAMILY = Family(
    model_type="gpt2",
    title="GPT-2",
    read_config=read_config,
    prefix="transformer.",
    rules=RULES,
    heads=("lm_head.", "score.", "multiple_choice_head.", "classifier.", "qa_outputs."),
    skipped=(_BLOCK + r"attn\.(bias|masked_bias)",),
    transposed=(_BLOCK + r"(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight",),
    tied=(("embeddings.word_embeddings.weight", "lm_head.weight"),),
)
