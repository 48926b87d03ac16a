"""Tiny random checkpoints of every family, saved as transformers' task classes save them, with a
tokenizer that fits: BERT's WordPiece vocabulary (tiny.TINY_VOCAB) for BERT, DistilBERT and
ELECTRA, a byte-level BPE trained here on a few sentences for RoBERTa, GPT-2 and the Llama-style
decoders (with a <s> token before each text, as Llama's tokenizer adds). Offline."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny import TINY, write_tiny_tokenizer

BPE_VOCAB = 300  # 256 bytes, the special tokens and a few merges
SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
CONFIGS = {  # model_type -> (transformers config class, its arguments)
    "bert": ("BertConfig", dict(**SHAPE, vocab_size=TINY["vocab_size"], max_position_embeddings=64)),
    "roberta": (
        "RobertaConfig",
        dict(
            **SHAPE,
            vocab_size=BPE_VOCAB,
            max_position_embeddings=66,
            type_vocab_size=1,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
        ),
    ),
    "distilbert": (
        "DistilBertConfig",
        dict(vocab_size=TINY["vocab_size"], dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64),
    ),
    "electra": (
        "ElectraConfig",
        dict(**SHAPE, vocab_size=TINY["vocab_size"], embedding_size=16, max_position_embeddings=64),
    ),
    "gpt2": (
        "GPT2Config",
        dict(vocab_size=BPE_VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0),
    ),
}
# the Llama-style decoders: 4 heads of width 8, 2 key/value heads unless a test says otherwise; a few spare
# ids, as Qwen2Tokenizer adds its own <|endoftext|> padding token
_DECODER = dict(
    vocab_size=BPE_VOCAB + 4,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=40,
    num_key_value_heads=2,
    max_position_embeddings=64,
    bos_token_id=1,
    eos_token_id=2,
    tie_word_embeddings=False,
)
DECODER_CONFIGS = {
    "llama": ("LlamaConfig", dict(_DECODER, rope_parameters=dict(rope_type="default", rope_theta=500.0))),
    "mistral": ("MistralConfig", dict(_DECODER, sliding_window=5)),  # shorter than the test sentences
    "qwen2": ("Qwen2Config", _DECODER),
}
CONFIGS.update(DECODER_CONFIGS)
TASK_CLASSES = {
    "bert": "BertForMaskedLM",
    "roberta": "RobertaForMaskedLM",
    "distilbert": "DistilBertForMaskedLM",
    "electra": "ElectraForPreTraining",
    "gpt2": "GPT2LMHeadModel",
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
}
DECODERS = tuple(DECODER_CONFIGS)
FAMILIES = tuple(f for f in CONFIGS if f not in DECODERS)
_TEXTS = [
    "The animal didn't cross the street because it was too tired.",
    "The cat sat on the mat.",
    "The trophy doesn't fit in the suitcase because it is too big.",
    "She read the book and he ran.",
]


def write_bpe_tokenizer(folder: Path, roberta: bool, llama: bool = False) -> None:
    """A byte-level BPE tokenizer of BPE_VOCAB ids: RoBERTa's specials and <s> ... </s> framing,
    GPT-2's single <|endoftext|> and no framing, or (llama) Llama's <unk>, <s>, </s> with <s> first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = (
        ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        if roberta
        else ["<unk>", "<s>", "</s>"]
        if llama
        else ["<|endoftext|>"]
    )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        _TEXTS * 4,
        trainers.BpeTrainer(
            vocab_size=BPE_VOCAB, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    if roberta:
        tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
        names = dict(
            bos_token="<s>",
            eos_token="</s>",
            sep_token="</s>",
            cls_token="<s>",
            unk_token="<unk>",
            pad_token="<pad>",
            mask_token="<mask>",
        )
    elif llama:
        tok.post_processor = processors.Sequence(
            [
                processors.ByteLevel(trim_offsets=False),
                processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", 1)]),
            ]
        )
        names = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        names = dict(bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, **names)
    assert len(tokenizer) <= BPE_VOCAB
    tokenizer.save_pretrained(str(folder))


def randomise(model: torch.nn.Module, std: float = 0.3, seed: int = 0) -> None:
    """Every parameter drawn again from N(0, std): biases and norms too, so a misplaced one shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * std)


def make_family(
    folder: Path,
    family: str,
    model_class: str | None = None,
    safe: bool = True,
    seed: int = 0,
    max_shard_size: str | None = None,
    **overrides,
) -> Path:
    """Save a tiny random `family` model of `model_class` (its task class by default) and its tokenizer;
    with `max_shard_size` ("20KB") in several files and an index."""
    import transformers

    config_class, values = CONFIGS[family]
    config = getattr(transformers, config_class)(**{**values, **overrides})
    model = getattr(transformers, model_class or TASK_CLASSES[family])(config).eval()
    randomise(model, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder), **({"max_shard_size": max_shard_size} if max_shard_size else {}))
    if not safe:  # the older pickle-based format
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    if family in ("roberta", "gpt2") + DECODERS:
        write_bpe_tokenizer(folder, roberta=family == "roberta", llama=family in DECODERS)
    else:
        write_tiny_tokenizer(folder)
    return folder


def reference(folder: Path):
    """transformers' own base model on the same checkpoint, eager attention."""
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()


# ---- more families (tests/families/test_families_more.py): XLM-RoBERTa, Qwen3, GPT-NeoX, OPT, OLMo2 ----
_NEOX = dict(
    vocab_size=BPE_VOCAB + 4,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
    bos_token_id=1,
    eos_token_id=2,
)
MORE_CONFIGS = {  # model_type -> (transformers config class, its arguments, task class, tokenizer kind)
    "xlm-roberta": ("XLMRobertaConfig", CONFIGS["roberta"][1], "XLMRobertaForMaskedLM", "roberta"),
    "qwen3": ("Qwen3Config", dict(_DECODER, head_dim=16), "Qwen3ForCausalLM", "llama"),  # H·d = 64 ≠ 32
    "gpt_neox": (
        "GPTNeoXConfig",
        dict(_NEOX, rope_parameters=dict(rope_theta=100.0, partial_rotary_factor=0.5)),
        "GPTNeoXForCausalLM",
        "llama",
    ),
    "opt": ("OPTConfig", dict(_NEOX, ffn_dim=37, pad_token_id=1, word_embed_proj_dim=32), "OPTForCausalLM", "llama"),
}


def make_more(folder: Path, family: str, model_class: str | None = None, seed: int = 0, **overrides) -> Path:
    """Save a tiny random `family` model of MORE_CONFIGS (its task class by default) and a BPE tokenizer."""
    import transformers

    config_class, values, task_class, tokenizer = MORE_CONFIGS[family]
    config = getattr(transformers, config_class)(**{**values, **overrides})
    model = getattr(transformers, model_class or task_class)(config).eval()
    randomise(model, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    for name, buffer in model.named_buffers():  # Gemma 4's saved layer_scalar: ones unless drawn again
        if name.endswith("layer_scalar"):
            buffer.copy_(torch.rand(buffer.shape, generator=generator) + 0.5)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    if tokenizer == "wordpiece":  # BERT's, as DeBERTa-v2's tiny checkpoint reads it
        write_tiny_tokenizer(folder)
    else:
        write_bpe_tokenizer(folder, roberta=tokenizer == "roberta", llama=tokenizer == "llama")
    return folder


MORE_CONFIGS["olmo2"] = ("Olmo2Config", dict(_DECODER, pad_token_id=None), "Olmo2ForCausalLM", "llama")
# OLMo 3 with four layers, three of each four windowed (layer_types' default) to 3 keys: the test sentences pass it
_OLMO3 = dict(_DECODER, num_hidden_layers=4, sliding_window=3, pad_token_id=None)
MORE_CONFIGS["olmo3"] = ("Olmo3Config", _OLMO3, "Olmo3ForCausalLM", "llama")
# gpt-oss with four layers (windowed to 3 keys and full, alternating), 4 experts of which each token takes 2, and
# the released models' yarn rotary (factor 32 over 4,096 positions there; 4 over 16 here, the ramp not truncated)
_GPT_OSS = dict(
    _DECODER, num_hidden_layers=4, sliding_window=3, num_local_experts=4, num_experts_per_tok=2, head_dim=8,
    rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                     "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 16},
    pad_token_id=None,
)  # fmt: skip
MORE_CONFIGS["gpt_oss"] = ("GptOssConfig", _GPT_OSS, "GptOssForCausalLM", "llama")
# SmolLM3 with a NoPE layer every second one: layer 0 turned by rotary, layer 1 attending by content alone
_SMOLLM3 = dict(_DECODER, no_rope_layer_interval=2, pad_token_id=None)
MORE_CONFIGS["smollm3"] = ("SmolLM3Config", _SMOLLM3, "SmolLM3ForCausalLM", "llama")


# ---- encoder-decoders: the task class saved, transformers' base model (BartModel, T5Model ...) the reference ----
_SEQ2SEQ = dict(
    vocab_size=BPE_VOCAB,
    d_model=32,
    encoder_layers=2,
    encoder_attention_heads=4,
    encoder_ffn_dim=37,
    decoder_layers=3,
    decoder_attention_heads=2,
    decoder_ffn_dim=41,
    max_position_embeddings=64,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
)
# T5 with few buckets, so that the test sentences reach the logarithmic ones and the last
_T5 = dict(
    vocab_size=BPE_VOCAB,
    d_model=32,
    d_kv=8,
    d_ff=37,
    num_layers=2,
    num_decoder_layers=3,
    num_heads=4,
    relative_attention_num_buckets=8,
    relative_attention_max_distance=12,
    pad_token_id=1,
    eos_token_id=2,
    decoder_start_token_id=1,
)
SEQ2SEQ_CONFIGS = {  # name -> (transformers config class, its arguments, task class)
    "bart": ("BartConfig", _SEQ2SEQ, "BartForConditionalGeneration"),
    "bart-scaled": (
        "BartConfig",
        dict(_SEQ2SEQ, scale_embedding=True, activation_function="relu"),
        "BartForConditionalGeneration",
    ),
    "mbart": ("MBartConfig", _SEQ2SEQ, "MBartForConditionalGeneration"),
    "marian": (
        "MarianConfig",
        dict(_SEQ2SEQ, scale_embedding=True, activation_function="swish", decoder_start_token_id=1),
        "MarianMTModel",
    ),
    "t5": ("T5Config", _T5, "T5ForConditionalGeneration"),  # v1.0: ReLU, tied embeddings
    "t5-gated": (
        "T5Config",
        dict(_T5, d_kv=12, feed_forward_proj="gated-gelu", tie_word_embeddings=False),
        "T5ForConditionalGeneration",
    ),  # v1.1 / Flan-T5: gated GELU, heads 4·12 wide ≠ d_model
}
SEQ2SEQ = tuple(SEQ2SEQ_CONFIGS)


def make_seq2seq(folder: Path, name: str, seed: int = 0, **overrides) -> Path:
    """Save a tiny random encoder-decoder `name` (a SEQ2SEQ_CONFIGS key) as its task class, with a trained
    byte-level BPE tokenizer (<s>=0, <pad>=1, </s>=2)."""
    import transformers

    config_class, values, task_class = SEQ2SEQ_CONFIGS[name]
    config = getattr(transformers, config_class)(**{**values, **overrides})
    model = getattr(transformers, task_class)(config).eval()
    randomise(model, seed=seed)
    if hasattr(model, "final_logits_bias"):  # a buffer, not a parameter: randomised so that the LM head reads it
        model.final_logits_bias.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(seed))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    write_bpe_tokenizer(folder, roberta=True)
    return folder


# ---- Gemma, Gemma2, Phi (tests/families/test_families_gemma.py): made by make_more ----
_GEMMA = dict(_DECODER, head_dim=16, pad_token_id=0, tie_word_embeddings=True)  # H·d = 64 ≠ 32
MORE_CONFIGS["gemma"] = ("GemmaConfig", _GEMMA, "GemmaForCausalLM", "llama")
MORE_CONFIGS["gemma2"] = (
    "Gemma2Config",
    # a window shorter than the test sentences, scores large enough for the cap to bite
    dict(_GEMMA, sliding_window=5, query_pre_attn_scalar=4, attn_logit_softcapping=2.0, num_hidden_layers=3),
    "Gemma2ForCausalLM",
    "llama",
)
MORE_CONFIGS["phi"] = (
    "PhiConfig",
    dict(_NEOX, rope_parameters=dict(rope_theta=100.0, partial_rotary_factor=0.5)),
    "PhiForCausalLM",
    "llama",
)


# ---- Phi-3, Gemma3, ModernBERT, DeBERTa-v2 (tests/families/test_families_new.py): made by make_more ----
MORE_CONFIGS["phi3"] = (
    "Phi3Config",
    dict(_DECODER, pad_token_id=None, rope_parameters=dict(rope_theta=100.0, partial_rotary_factor=0.5)),
    "Phi3ForCausalLM",
    "llama",
)
MORE_CONFIGS["gemma3_text"] = (
    "Gemma3TextConfig",
    # three layers, the last full; windowed ones on their own rotary base, a window shorter than the sentences
    dict(
        _GEMMA,
        num_hidden_layers=3,
        sliding_window=5,
        query_pre_attn_scalar=4,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters=dict(
            full_attention=dict(rope_type="linear", factor=2.0, rope_theta=1000.0),
            sliding_attention=dict(rope_type="default", rope_theta=50.0),
        ),
    ),
    "Gemma3ForCausalLM",
    "llama",
)
# Gemma 4 with four layers, windowed (4 keys, shorter than the test sentences) and full alternating, the full
# layers' heads twice as wide (16) and turned by proportional rotary on a quarter of their pairs, 8-wide per-layer
# inputs
_GEMMA4 = dict(
    _GEMMA, vocab_size_per_layer_input=BPE_VOCAB + 4, intermediate_size=37, num_hidden_layers=4, head_dim=8,
    global_head_dim=16, hidden_size_per_layer_input=8, sliding_window=4,
    layer_types=["sliding_attention", "full_attention"] * 2,
)  # fmt: skip
MORE_CONFIGS["gemma4_text"] = ("Gemma4TextConfig", _GEMMA4, "Gemma4ForCausalLM", "llama")
MORE_CONFIGS["modernbert"] = (
    "ModernBertConfig",
    # layers 0 and 3 full, 1 and 2 seeing 3 keys either side
    dict(
        vocab_size=BPE_VOCAB,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        local_attention=6,
        global_attn_every_n_layers=3,
        global_rope_theta=1000.0,
        local_rope_theta=30.0,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        cls_token_id=0,
        sep_token_id=2,
    ),
    "ModernBertForMaskedLM",
    "roberta",
)
MORE_CONFIGS["deberta-v2"] = (
    "DebertaV2Config",
    # as DeBERTa-v3: relative attention only, few buckets so that the sentences reach the log-spaced ones
    dict(
        **SHAPE,
        vocab_size=TINY["vocab_size"],
        max_position_embeddings=64,
        relative_attention=True,
        position_biased_input=False,
        pos_att_type=["p2c", "c2p"],
        position_buckets=8,
        max_relative_positions=16,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        type_vocab_size=0,
    ),
    "DebertaV2ForMaskedLM",
    "wordpiece",
)


# the families a grid of every family runs in the everyday selection: an encoder, the two decoder layouts, and the
# designs that once let a bug through or have a part of their own (DeBERTa's terms, gpt-oss's sinks, Gemma 3's first
# full layer, Gemma 4's per-layer heads); the full command runs every case
EVERYDAY = ("bert", "gpt2", "llama", "deberta-v2", "gpt_oss", "gemma3_text", "gemma4_text")


def corners(names) -> list:
    """A grid's cases, those not in EVERYDAY marked slow (the everyday selection leaves them to the full command)."""
    return [name if name in EVERYDAY else pytest.param(name, marks=pytest.mark.slow) for name in names]
