"""Forward-pass time: our model against transformers' eager one, same weights, same inputs.

    python bench/forward.py [--model SOURCE] [--repeats 15] [--threads 2] [--layers 4] [--no-families]
                            [--families bert,qwen3,...] [--clock wall|cpu]

Both return every layer's attention probabilities (transformers with output_attentions=True).
Prints the median time per forward at about 16, 128 and 512 tokens and the ratio ours / theirs
for the checkpoint (bundled MiniLM by default); then, per family, the ratio at 120 and 500 tokens
on random checkpoints with the base models' widths (BERT, RoBERTa, DistilBERT, ELECTRA: 768 wide,
12 heads, 3072 feed-forward; GPT-2 small: 768, 12 heads; the families added since at the same width, with a
1000-token vocabulary: XLM-RoBERTa, DeBERTa-v2, ModernBERT, GPT-NeoX, OPT, Phi, Phi-3, Qwen3, OLMo2, Gemma,
Gemma2, Gemma3, Gemma 4) and `--layers` layers (0: each base
model's own count, 6 for DistilBERT and 12 for the others), token ids drawn at random.
`--clock cpu` times each call by this process's CPU time instead of the wall clock: on a machine shared with
other work, time spent waiting for a core then counts on neither side (best with --threads 1, where no worker
thread spins while waiting). `--families` picks some families' rows.
The other benches take their timing loop, model pair and texts of a given length from here.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from attention import Transformer, encode, load_bert  # noqa: E402
from attention.load.convert import convert_checkpoint, copy_weights  # noqa: E402
from attention.models import FAMILIES  # noqa: E402

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
SENTENCE = "The animal didn't cross the street because it was too tired, and the street was wide. "
PASSAGE = [
    "The animal didn't cross the street because it was too tired.",
    "A small dog chased the ball across the wet grass while the children laughed.",
    "Tokenization splits unbelievably uncommon words into several pieces.",
    "The trophy doesn't fit in the suitcase because it is too big.",
    "After the storm, the fishermen repaired their nets and waited for calmer water.",
    "She said that the report, which nobody had read, was already out of date.",
    "Researchers measured how attention heads distribute weight over long inputs.",
    "On Tuesday the committee postponed its decision until the budget was approved.",
]


def interleaved_medians(fns, repeats: int, clock=time.perf_counter) -> list[float]:
    """Median seconds of each function, run in turn so that both see the same machine load; `clock` reads
    the time (time.process_time: this process's CPU time)."""
    for fn in fns:
        fn()  # warm-up
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, record in zip(fns, times):
            start = clock()
            fn()
            record.append(clock() - start)
    return [statistics.median(t) for t in times]


def reference_pair(source: str | None):
    """Our model and tokenizer for `source`, and transformers' eager BertModel on the same checkpoint."""
    from transformers import BertModel as ReferenceBert

    ours, tokenizer = load_bert(source)
    theirs = ReferenceBert.from_pretrained(ours.load_report.path, attn_implementation="eager").eval()
    return ours, tokenizer, theirs


def text_of_length(tokenizer, target: int, variant: int) -> str:
    """An English text of `target` tokens ([CLS] and [SEP] included); variants differ in wording."""
    start = variant % len(PASSAGE)
    sentences = PASSAGE[start:] + PASSAGE[:start]
    words = " ".join(sentences * (target // 40 + 2)).split()

    def count(k: int) -> int:
        return len(tokenizer(" ".join(words[:k]), verbose=False)["input_ids"])

    low, high = 1, len(words)  # the largest prefix that fits: count(low) <= target
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if count(mid) <= target else (low, mid - 1)
    return " ".join(words[:low]) + " the" * (target - count(low))  # "the" is one token


# transformers' base model and config for each family, at the base models' widths
BASE_SHAPES = {
    "bert": ("BertModel", "BertConfig", dict(num_hidden_layers=12)),
    "roberta": (
        "RobertaModel",
        "RobertaConfig",
        dict(num_hidden_layers=12, max_position_embeddings=514, type_vocab_size=1, vocab_size=50265),
    ),
    "distilbert": ("DistilBertModel", "DistilBertConfig", dict(n_layers=6)),
    "electra": (
        "ElectraModel",
        "ElectraConfig",
        dict(num_hidden_layers=12, hidden_size=768, embedding_size=768, num_attention_heads=12, intermediate_size=3072),
    ),
    "gpt2": ("GPT2Model", "GPT2Config", dict(n_layer=12)),
}
_WIDE = dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072, vocab_size=1000)
_DECODER = dict(_WIDE, num_key_value_heads=4, max_position_embeddings=2048)
# the families added since: 768 wide, 12 heads of 64 (4 K/V heads where the family groups them), a short vocabulary
BASE_SHAPES.update(
    {
        "xlm-roberta": ("XLMRobertaModel", "XLMRobertaConfig", dict(BASE_SHAPES["roberta"][2], vocab_size=1000)),
        "deberta-v2": (
            "DebertaV2Model",
            "DebertaV2Config",
            dict(
                _WIDE,
                relative_attention=True,
                position_biased_input=False,
                pos_att_type=["p2c", "c2p"],
                position_buckets=256,
                norm_rel_ebd="layer_norm",
                share_att_key=True,
            ),
        ),
        "modernbert": (
            "ModernBertModel",
            "ModernBertConfig",
            dict(
                _WIDE,
                local_attention=128,
                **dict.fromkeys(("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id"), 0),
            ),
        ),
        "gpt_neox": ("GPTNeoXModel", "GPTNeoXConfig", dict(_WIDE, max_position_embeddings=2048)),
        "opt": ("OPTModel", "OPTConfig", dict(_WIDE, ffn_dim=3072, pad_token_id=1, max_position_embeddings=2048)),
        "phi": ("PhiModel", "PhiConfig", dict(_DECODER)),
        "phi3": ("Phi3Model", "Phi3Config", dict(_DECODER, pad_token_id=0, eos_token_id=0)),
        "qwen3": ("Qwen3Model", "Qwen3Config", dict(_DECODER, head_dim=64)),
        "olmo2": ("Olmo2Model", "Olmo2Config", dict(_DECODER, pad_token_id=0, eos_token_id=0)),
        # three layers of four windowed to 256 keys: at 500 tokens the window drops keys
        "olmo3": ("Olmo3Model", "Olmo3Config", dict(_DECODER, pad_token_id=0, eos_token_id=0, sliding_window=256)),
        "smollm3": ("SmolLM3Model", "SmolLM3Config", dict(_DECODER, pad_token_id=0)),  # each fourth layer NoPE
        # sinks, windowed and full layers alternating (128 keys), 8 experts of which each token takes 2, yarn rotary
        "gpt_oss": (
            "GptOssModel",
            "GptOssConfig",
            dict(
                _DECODER,
                head_dim=64,
                intermediate_size=768,
                sliding_window=128,
                num_local_experts=8,
                num_experts_per_tok=2,
                pad_token_id=0,
                eos_token_id=0,
            ),
        ),
        "gemma": ("GemmaModel", "GemmaConfig", dict(_DECODER, head_dim=64)),
        "gemma2": ("Gemma2Model", "Gemma2Config", dict(_DECODER, head_dim=64, sliding_window=256)),
        "gemma3_text": ("Gemma3TextModel", "Gemma3TextConfig", dict(_DECODER, head_dim=64, sliding_window=256)),
        # windowed (256 keys) and full layers 5:1, the full layers' heads 128 wide on proportional rotary, v_norm,
        # 64-wide per-layer inputs and each layer's scalar
        "gemma4_text": (
            "Gemma4TextModel",
            "Gemma4TextConfig",
            dict(
                _DECODER,
                head_dim=64,
                global_head_dim=128,
                sliding_window=256,
                hidden_size_per_layer_input=64,
                vocab_size_per_layer_input=_DECODER["vocab_size"],
            ),
        ),
    }
)
DECODERS = (
    "gpt2", "gpt_neox", "opt", "phi", "phi3", "qwen3", "olmo2", "olmo3", "smollm3", "gpt_oss", "gemma", "gemma2",
    "gemma3_text", "gemma4_text",
)  # fmt: skip
_LAYER_FIELD = {"distilbert": "n_layers", "gpt2": "n_layer"}


def family_pair(family: str, layers: int = 0, seed: int = 0):
    """A random transformers base model of `family` (eager attention) and ours with its weights."""
    import transformers

    model_class, config_class, values = BASE_SHAPES[family]
    if layers:
        values = {**values, _LAYER_FIELD.get(family, "num_hidden_layers"): layers}
    torch.manual_seed(seed)
    config = getattr(transformers, config_class)(**values, attn_implementation="eager")
    theirs = getattr(transformers, model_class)(config).eval()
    spec = FAMILIES[family]
    ours = Transformer(spec.read_config(config.to_dict()))
    tensors, _ = convert_checkpoint(spec, theirs.state_dict())
    copy_weights(ours, tensors)
    return ours.eval().requires_grad_(False), theirs


def family_table(repeats: int, layers: int, families=tuple(BASE_SHAPES), clock=time.perf_counter) -> None:
    """Per family, ours / transformers at 120 and 500 tokens."""
    print(
        f"\nfamilies: random checkpoints, {'base model layer counts' if not layers else f'{layers} layers'}, "
        f"768 wide, 12 heads; median of {repeats}"
    )
    print(f"{'family':<12} {'layers':>6} {'tokens':>7} {'ours ms':>9} {'transformers ms':>16} {'ratio':>7}")
    for family in families:
        ours, theirs = family_pair(family, layers)
        for tokens in (120, 500):
            ids = torch.randint(5, ours.config.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(tokens))
            mask, types = torch.ones_like(ids), torch.zeros_like(ids)
            extra = {"token_type_ids": types} if ours.config.type_vocab_size else {}
            with torch.inference_mode():
                t_ours, t_theirs = interleaved_medians(
                    [
                        partial(ours, ids, mask, types),
                        partial(theirs, ids, attention_mask=mask, output_attentions=True, **extra),
                    ],
                    repeats,
                    clock,
                )
            print(
                f"{family:<12} {ours.config.num_hidden_layers:>6} {tokens:>7} {t_ours * 1e3:>9.1f} "
                f"{t_theirs * 1e3:>16.1f} {t_ours / t_theirs:>7.2f}"
            )
        del ours, theirs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="checkpoint folder or hub id (default: bundled MiniLM)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--layers", type=int, default=4, help="layers of each family's random model (0: the base model's own count)"
    )
    ap.add_argument("--no-families", action="store_true", help="only the --model table")
    ap.add_argument("--families", default=",".join(BASE_SHAPES), help="comma-separated families (default: all)")
    ap.add_argument("--clock", choices=tuple(CLOCKS), default="wall", help="wall clock, or this process's CPU time")
    args = ap.parse_args()
    families = args.families.split(",")
    unknown = [family for family in families if family not in BASE_SHAPES]
    if unknown:
        ap.error(f"unknown families {', '.join(unknown)}; known: {', '.join(BASE_SHAPES)}")
    clock = CLOCKS[args.clock]
    torch.set_num_threads(args.threads)
    ours, tokenizer, theirs = reference_pair(args.model)
    print(
        f"model: {ours.load_report.source}; torch {torch.__version__}, {args.threads} threads, "
        f"{platform.processor() or platform.machine()}; median of {args.repeats}, {args.clock} clock"
    )
    print(f"{'tokens':>7} {'ours ms':>9} {'transformers ms':>16} {'ratio':>7}")
    for target in (16, 128, 512):
        text = " ".join(SENTENCE.split()[: max(1, target - 2)])
        while len(tokenizer(text, verbose=False)["input_ids"]) < target:
            text += " " + SENTENCE
        enc = encode(tokenizer, text, max_length=target)
        ids, mask, types = enc.input_ids, enc.attention_mask, enc.token_type_ids
        with torch.inference_mode():
            t_ours, t_theirs = interleaved_medians(
                [
                    partial(ours, ids, mask, types),
                    partial(theirs, ids, attention_mask=mask, token_type_ids=types, output_attentions=True),
                ],
                args.repeats,
                clock,
            )
        print(f"{ids.shape[1]:>7} {t_ours * 1e3:>9.2f} {t_theirs * 1e3:>16.2f} {t_ours / t_theirs:>7.2f}")
    if not args.no_families:
        family_table(args.repeats, args.layers, families, clock)


if __name__ == "__main__":
    main()
