"""The six groups of a model's settings, each a frozen dataclass of what one part of the family does
(attention/config.py's ModelConfig holds one of each and routes config.json's flat names to them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class PositionSettings:
    """How positions enter: a table, sines, rotary angles (with their scaling and the layers left without), T5's
    bias or DeBERTa's terms (models/position_parts.py)."""

    position_embedding_type: str = "absolute"
    position_offset: int = 0  # rows of the position table before the first position (RoBERTa: pad + 1)
    positions_skip_padding: bool = False  # padding tokens take no position, read row pad_token_id (RoBERTa)
    positions_from_mask: bool = False  # positions count the attention mask's real tokens, padding reads
    # row position_offset - 1 (OPT)
    positions_after_projection: bool = False  # positions added after the embedding projection, D wide (OPT)
    rope_theta: float = 10000.0
    rope_type: str = "default"  # or "linear", "dynamic", "llama3", "yarn": how the frequencies are rescaled
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0  # llama3 only
    rope_high_freq_factor: float = 4.0  # llama3 only
    rope_original_max_position_embeddings: int | None = None  # llama3 and yarn
    rope_beta_fast: float | None = None  # yarn: the ramp between kept and interpolated frequencies (None: 32)
    rope_beta_slow: float | None = None  # (None: 1)
    rope_truncate: bool = True  # yarn: the ramp's ends rounded to whole dimensions
    rope_attention_factor: float | None = None  # yarn: cos and sin times this; None: from factor (and mscales)
    rope_mscale: float | None = None
    rope_mscale_all_dim: float | None = None
    rope_proportion: float = 1.0  # proportional (Gemma 4): the share of the d/2 pairs turned, θ_i over all d
    rotary_fraction: float = 1.0  # the share of each head's d that rotary turns (GPT-NeoX's rotary_pct)
    local_rope_theta: float | None = None  # rotary base of the windowed layers (Gemma3, ModernBERT); None: rope_theta
    nope_layers: tuple[int, ...] = ()  # rotary models: the layers whose q and k are not turned (SmolLM3's NoPE)
    position_buckets: int = 0  # disentangled: buckets of relative distance (log-spaced beyond half); 0: exact
    max_relative_positions: int = 512  # disentangled: the farthest distance the buckets tell apart
    pos_att_type: str = "c2p|p2c"  # disentangled: the position terms added to content-to-content
    relative_norm: bool = True  # disentangled: a LayerNorm over the table of relative positions
    relative_attention_num_buckets: int = 32  # relative positions only (T5)
    relative_attention_max_distance: int = 128  # relative positions only: the last bucket's distance


@dataclass(frozen=True)
class AttentionSettings:
    """How each layer attends: causal or not, the Q·K·V projection's layout and biases, a Q/K norm, how the
    scores are scaled and capped, sliding windows."""

    causal: bool = False  # a decoder: every token sees only itself and earlier tokens
    fused_qkv: bool = False  # one projection makes Q, K and V (GPT-2's c_attn)
    qkv_per_head: bool = False  # a fused projection laid out per head, [q_h k_h v_h] for each head (GPT-NeoX)
    attention_bias: bool = True
    output_bias: bool | None = None  # the attention output projection's bias; None: as attention_bias (Qwen2: none)
    qk_norm: str | None = None  # a norm on q and k before rotary: "head" over each head's d (Qwen3),
    # "projection" over all heads' H·d (OLMo2); None: no norm
    scale_scores: bool = True  # q · k times head_dim ** -0.5; False: unscaled (T5)
    query_pre_attn_scalar: float | None = None  # the scores scaled by its -0.5 power, not head_dim's (Gemma2)
    attn_logit_softcapping: float | None = None  # scores capped to tanh(s / cap) · cap before the mask (Gemma2)
    value_norm: bool = False  # each head's v normalised over d by an RMSNorm without a weight (Gemma 4's v_norm)
    full_head_dim: int | None = None  # the full layers' head width d when not head_dim (Gemma 4's global_head_dim)
    sinks: bool = False  # each head's learned logit joins every row's softmax as a column of no key (gpt-oss)
    sliding_window: int | None = None  # causal layers see only this many latest keys (Mistral); an encoder's
    # see the keys fewer than this many positions away on either side (ModernBERT)
    first_sliding_layer: int = 0  # layers before it see every key (Qwen2's max_window_layers)
    sliding_window_pattern: int = 0  # > 0: every layer sees the window but each pattern-th (i + 1 = n · pattern)
    # sees every key (Gemma2: 2, windowed and full layers alternating); 0: first_sliding_layer decides
    first_full_layer: int | None = None  # with sliding_window_pattern: the first layer seeing every key; None:
    # pattern - 1 (Gemma2, Gemma3); ModernBERT's is 0
    attention_probs_dropout_prob: float = 0.1


@dataclass(frozen=True)
class NormSettings:
    """The norms and where they sit around the residuals (models/residuals.py)."""

    norm: str = "layer_norm"  # or "rms_norm"
    layer_norm_eps: float = 1e-12
    norm_bias: bool = True  # the LayerNorms' bias (ModernBERT: none)
    embedding_norm: bool = True  # a norm over the summed embeddings (GPT-2: none)
    pre_norm: bool = False  # norm before each sub-block, residual after (GPT-2); else after the residual
    final_norm: bool = False  # a norm after the last layer (GPT-2's ln_f)
    norm_after_sublayer: bool = False  # x + norm(sub-block(x)): each output normalised before the residual (OLMo2)
    parallel_residual: bool = False  # pre-norm: x + attention(norm(x)) + feed_forward(norm'(x)) (GPT-NeoX)
    one_block_norm: bool = False  # parallel residual: one norm read by the attention and the feed-forward (Phi)
    first_attention_norm: bool = True  # False: layer 0's attention reads x unnormed (ModernBERT)


@dataclass(frozen=True)
class FeedForwardSettings:
    """The feed-forward block: its activation, gated or not, fused or not, biased or not."""

    hidden_act: str = "gelu"
    gated_mlp: bool = False  # act(gate(x)) * intermediate(x), as Llama's MLP
    fused_gate_up: bool = False  # one projection D -> 2·F, its first half through the activation times the second
    mlp_bias: bool = True
    num_local_experts: int = 0  # > 0: a mixture of experts, each token's top num_experts_per_tok (gpt-oss)
    num_experts_per_tok: int = 0
    swiglu_limit: float | None = None  # the experts' gate clamped above, their up both sides, at this (gpt-oss)
    swiglu_alpha: float = 1.702  # the experts' gate · sigmoid(alpha · gate)


@dataclass(frozen=True)
class EmbeddingSettings:
    """The embeddings: their width when not hidden_size, their scale, the projections in and out."""

    embedding_size: int | None = None  # width of the embeddings if not hidden_size: projected up (ELECTRA)
    scale_embedding: bool = False  # word embeddings times sqrt(hidden_size) (Marian, some BARTs)
    scale_embedding_in_dtype: bool = False  # the sqrt(hidden_size) scale rounded to the embeddings' dtype first (Gemma)
    embedding_projection_bias: bool = True  # the embedding projection's bias (OPT's project_in: none)
    per_layer_input_size: int = 0  # > 0: each layer adds its own embedding of each token this wide (Gemma 4)
    per_layer_vocab_size: int | None = None  # the per-layer embeddings' rows; None: vocab_size
    layer_scalar: bool = False  # each layer's output times a saved scalar (Gemma 4's layer_scalar)
    final_projection: bool = False  # last hidden states projected back to the embedding width (OPT's project_out)
    hidden_dropout_prob: float = 0.1


@dataclass(frozen=True)
class EncoderDecoderSettings:
    """An encoder-decoder's decoder (BART, T5, Marian): the sizes above are the encoder's."""

    is_encoder_decoder: bool = False
    decoder_layers: int | None = None  # None: as the encoder's
    decoder_attention_heads: int | None = None
    decoder_ffn_dim: int | None = None
    decoder_start_token_id: int | None = None  # the token a decoder input starts with
    cross_attention: bool = False  # each block attends to the encoder's output after its self-attention


GROUPS = {
    "positions": PositionSettings,
    "attention": AttentionSettings,
    "norms": NormSettings,
    "feed_forward": FeedForwardSettings,
    "embeddings": EmbeddingSettings,
    "encoder_decoder": EncoderDecoderSettings,
}
GROUP_OF = {name: group for group, cls in GROUPS.items() for name in (f.name for f in dataclasses.fields(cls))}
