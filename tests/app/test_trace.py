"""The recorded forward pass: real tensors, real shapes, the real line of code behind each step."""

from pathlib import Path

import numpy as np
import pytest
import torch

from attention import BertConfig, BertModel, MultiHeadAttention, load_model
from attention.tracing.trace import head_matrix, trace_layer

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "The animal didn't cross the street because it was too tired."
SHORT = "It was tired."
LAYER = 2
NAMES = [
    "input",
    "q_proj",
    "k_proj",
    "v_proj",
    "q_view",
    "q_heads",
    "k_view",
    "k_heads",
    "v_view",
    "v_heads",
    "mask",
    "scores",
    "probs",
    "heads",
    "merged",
    "output",
]


def run(model, enc, layer=LAYER):
    """The trace of `layer` and the model's own attentions for the same input."""
    args = (enc["input_ids"], enc.get("attention_mask"), enc.get("token_type_ids"))
    trace = trace_layer(model, *args, layer=layer)
    with torch.inference_mode():
        attentions = model(*args).attentions
    return trace, attentions


@pytest.fixture(scope="module")
def single(minilm):
    model, tok = minilm
    return run(model, tok(SENTENCE, return_tensors="pt"))


@pytest.fixture(scope="module")
def padded(minilm):
    model, tok = minilm
    return run(model, tok([SENTENCE, SHORT], padding=True, return_tensors="pt"), layer=0)


def source(path: str = "attention/core/dot_product.py") -> list[str]:
    """The lines of a file of ours, by its path as a trace names it (the attention's steps by default)."""
    return (ROOT / path).read_text(encoding="utf-8").splitlines()


def test_steps_are_recorded_in_execution_order_with_their_real_shapes(single):
    trace, _ = single
    assert trace.names == NAMES
    shapes = {s.name: s.shape for s in trace.steps}
    assert shapes["input"] == shapes["q_proj"] == shapes["merged"] == shapes["output"] == (1, 16, 384)
    assert shapes["q_view"] == shapes["k_view"] == (1, 16, 12, 32)
    assert shapes["q_heads"] == shapes["k_heads"] == shapes["v_heads"] == shapes["heads"] == (1, 12, 16, 32)
    assert shapes["scores"] == shapes["probs"] == (1, 12, 16, 16)
    assert shapes["mask"] is None and trace.step("mask").tensor is None  # nothing padded: no mask
    assert (trace.B, trace.L, trace.S, trace.D, trace.H, trace.G, trace.d) == (1, 16, 16, 384, 12, 12, 32)
    for step in trace.steps:
        if step.tensor is not None:
            assert tuple(step.tensor.shape) == step.shape and step.tensor.device.type == "cpu"


def test_symbolic_shapes_name_every_axis_and_agree_with_the_sizes(single, padded):
    trace, _ = single
    dims = {s.name: s.dims for s in trace.steps}
    assert dims["input"] == ("B", "L", "D")
    assert dims["q_proj"] == ("B", "L", "H·d") and dims["k_proj"] == ("B", "S", "H·d")
    assert dims["q_view"] == ("B", "L", "H", "d") and dims["v_view"] == ("B", "S", "H", "d")
    assert dims["q_heads"] == ("B", "H", "L", "d") and dims["k_heads"] == ("B", "H", "S", "d")
    assert dims["scores"] == dims["probs"] == ("B", "H", "L", "S")
    assert dims["heads"] == ("B", "H", "L", "d") and dims["output"] == ("B", "L", "D")
    for trace in (single[0], padded[0]):
        sizes = {**trace.sizes(), "H·d": trace.H * trace.d, "1": 1}
        for step in trace.steps:
            if step.shape is not None:
                assert tuple(sizes[x] for x in step.dims) == step.shape, step.name
    assert padded[0].step("mask").dims == ("B", "1", "1", "S")


def test_probs_are_the_models_attentions_and_scores_were_cloned_before_the_softmax(single):
    trace, attentions = single
    probs, scores = trace.step("probs").tensor, trace.step("scores").tensor
    assert torch.equal(probs, attentions[LAYER])
    assert not torch.allclose(scores, probs)  # without a clone the in-place softmax overwrites it
    q, k, v = (trace.step(f"{x}_heads").tensor for x in "qkv")
    torch.testing.assert_close(scores, q @ k.transpose(-2, -1) / 32**0.5)
    torch.testing.assert_close(trace.step("heads").tensor, probs @ v)


def test_each_step_carries_the_line_of_code_that_made_it(single):
    trace, _ = single
    lines = source()
    scores = trace.step("scores")
    matmul = next(i for i, line in enumerate(lines, 1) if "torch.matmul(q, k.transpose" in line)
    assert scores.path == "attention/core/dot_product.py" and scores.lineno == matmul
    assert "torch.matmul(q, k.transpose" in scores.code
    assert f"attention/core/dot_product.py:{matmul}" in scores.where
    assert (
        trace.step("q_proj").path == "attention/core/qkv.py"
    )  # the projections and heads: the family's projection part
    assert trace.step("merged").path == "attention/core/mha.py"  # merging the heads: multi-head attention's own
    assert "torch.softmax(scores" in trace.step("probs").code  # not the bare `record("probs", probs)`
    assert trace.step("q_heads").lineno == trace.step("v_heads").lineno  # split_heads serves Q, K and V
    assert "q_proj" in trace.step("q_proj").code and "o_proj" in trace.step("output").code
    for step in trace.steps:  # every code line is that line of its file, comment left out
        for lineno, code in zip(step.linenos, step.code.splitlines()):
            assert " ".join(source(step.path)[lineno - 1].split("#")[0].split()) == code, step.name


def test_a_padded_batch_records_its_mask_and_the_masked_scores(padded, minilm):
    trace, attentions = padded
    _, tok = minilm
    keep = tok([SENTENCE, SHORT], padding=True, return_tensors="pt")["attention_mask"].bool()
    assert "masked_scores" in trace.names and trace.names.index("masked_scores") == trace.names.index("scores") + 1
    mask = trace.step("mask")
    assert mask.shape == (2, 1, 1, 16) and trace.S == 16
    assert torch.equal(mask.tensor[:, 0, 0], keep)
    assert "16, 6 of S" in mask.op
    masked = trace.step("masked_scores").tensor
    assert torch.equal(torch.isneginf(masked), ~keep[:, None, None, :].expand_as(masked))
    assert torch.equal(trace.step("probs").tensor, attentions[0])


def test_a_sentence_pair_keeps_its_segments_and_a_padded_batch_of_pairs_is_masked(minilm):
    model, tok = minilm
    pair, attentions = run(model, tok("The cat sat on the mat.", "It was warm.", return_tensors="pt"))
    assert pair.segments == (9, 5) and pair.S == pair.L == 14
    assert pair.step("mask").tensor is None  # one pair is not padded
    assert torch.equal(pair.step("probs").tensor, attentions[LAYER])
    enc = tok(
        ["The cat sat on the mat.", "A dog."],
        ["It was warm.", "It ran off quickly today."],
        padding=True,
        return_tensors="pt",
    )
    pairs, attentions = run(model, enc)
    assert pairs.step("mask").shape == (2, 1, 1, pairs.S)
    assert torch.isneginf(pairs.step("masked_scores").tensor).any()
    assert torch.equal(pairs.step("probs").tensor, attentions[LAYER])


@pytest.mark.parametrize("layer", [-1, 6, 1.0, "1", True, None])
def test_trace_layer_rejects_a_layer_the_model_does_not_have(minilm, layer):
    model, tok = minilm
    with pytest.raises(ValueError, match="layer must be an integer from 0 to 5"):
        trace_layer(model, tok(SHORT, return_tensors="pt")["input_ids"], layer=layer)


def test_head_matrix_gives_what_the_app_shows_for_one_head(single):
    trace, attentions = single
    head, d = 7, trace.d
    probs, rows, cols = head_matrix(trace, "probs", head)
    np.testing.assert_array_equal(probs, attentions[LAYER][0, head].numpy())
    assert (rows, cols) == ("L", "S")
    q, rows, cols = head_matrix(trace, "q_heads", head)
    q_proj = trace.step("q_proj").tensor[0]
    np.testing.assert_array_equal(q, q_proj[:, head * d : (head + 1) * d].numpy())
    np.testing.assert_array_equal(q, q_proj.view(16, 12, 32)[:, head].numpy())
    assert (rows, cols) == ("L", "d")
    np.testing.assert_array_equal(head_matrix(trace, "q_proj", head)[0], q)
    np.testing.assert_array_equal(head_matrix(trace, "k_view", head)[0], head_matrix(trace, "k_heads", head)[0])
    assert head_matrix(trace, "k_heads", head)[1:] == ("S", "d")
    x, rows, cols = head_matrix(trace, "input", head)
    assert x.shape == (16, 384) and (rows, cols) == ("L", "D")
    assert head_matrix(trace, "merged", head)[0].shape == (16, 384)
    mask, rows, cols = head_matrix(trace, "mask", head)
    np.testing.assert_array_equal(mask, np.ones((16, 16)))  # no mask: every pair may attend
    with pytest.raises(ValueError, match="head"):
        head_matrix(trace, "probs", 12)
    with pytest.raises(KeyError, match="masked_scores"):
        head_matrix(trace, "masked_scores", 0)


def test_head_matrix_of_the_mask_is_one_where_a_query_may_attend(padded):
    trace, attentions = padded
    short = head_matrix(trace, "mask", 4, batch=1)[0]
    assert short.shape == (16, 16)
    np.testing.assert_array_equal(short, np.repeat([[1.0] * 6 + [0.0] * 10], 16, axis=0))
    np.testing.assert_array_equal(head_matrix(trace, "mask", 4, batch=0)[0], np.ones((16, 16)))
    masked = head_matrix(trace, "masked_scores", 4, batch=1)[0]
    assert np.isneginf(masked[:, 6:]).all() and np.isfinite(masked[:, :6]).all()
    np.testing.assert_array_equal(head_matrix(trace, "probs", 4, batch=1)[0], attentions[0][1, 4].numpy())


def gqa_trace():
    """A tiny random BERT whose layer 1 uses grouped-query attention: 4 query heads, 2 K/V heads."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    model = BertModel(config).eval()
    model.layers[1].attention = MultiHeadAttention(32, 4, num_kv_heads=2).eval()
    return trace_layer(model, torch.randint(5, 99, (1, 7)), layer=1)


def test_grouped_query_attention_records_the_shared_heads():
    trace = gqa_trace()
    assert trace.names.index("k_shared") == trace.names.index("v_heads") + 1
    assert (trace.H, trace.G, trace.d) == (4, 2, 8)
    assert trace.step("k_heads").dims == ("B", "G", "S", "d") and trace.step("k_proj").dims == ("B", "S", "G·d")
    assert trace.step("k_shared").dims == ("B", "H", "S", "d")
    assert "H/G = 2" in trace.step("k_shared").op
    k_heads, k_shared = trace.step("k_heads").tensor[0], trace.step("k_shared").tensor[0]
    for head in range(4):  # query head h reads K/V head h // (H // G)
        np.testing.assert_array_equal(head_matrix(trace, "k_heads", head)[0], k_heads[head // 2].numpy())
        np.testing.assert_array_equal(head_matrix(trace, "k_shared", head)[0], k_shared[head].numpy())
        np.testing.assert_array_equal(
            head_matrix(trace, "v_proj", head)[0],
            trace.step("v_proj").tensor[0, :, (head // 2) * 8 : (head // 2 + 1) * 8].numpy(),
        )


def test_a_half_precision_trace_names_the_mask_step_it_ran(tmp_path):
    """bfloat16 scores are masked with masked_fill_ (an add could meet an overflowed +inf and give NaN), float32
    scores by adding masks.additive's 0 / -inf: each trace shows the line that ran, every other step the same
    line in either dtype. tests/families/test_cuda.py compares a GPU model's trace with the CPU's in the same dtype."""
    from families import make_family

    folder = make_family(tmp_path / "gpt2", "gpt2")
    (half, tok), (full, _) = load_model(folder, dtype="bfloat16"), load_model(folder)
    ids = tok(SENTENCE, return_tensors="pt")["input_ids"]
    traced, reference = trace_layer(half, ids, layer=1), trace_layer(full, ids, layer=1)
    assert traced.names == reference.names
    lines = source()
    for trace, made in ((traced, "scores.masked_fill_(~mask"), (reference, "scores.add_(additive(mask")):
        step = trace.step("masked_scores")
        assert made in step.code and made in lines[step.lineno - 1] and step.where == f"{step.path}:{step.lineno}"
    differ = [s.name for s, r in zip(traced.steps, reference.steps) if (s.code, s.where) != (r.code, r.where)]
    assert differ == ["masked_scores"]


def test_a_trace_of_one_head_keeps_that_heads_maps_and_every_steps_shape(minilm, padded):
    """Past the bound (ui/runs.get_trace) a trace keeps the chosen head's maps only: the same numbers for that
    head, the full shapes for the diagram, and a clear error for another head; kept_bytes sizes both before."""
    from attention.analysis.query_key import query_key
    from attention.tracing.trace import MAP_STEPS, kept_bytes

    model, tok = minilm
    full, _ = padded
    enc = tok([SENTENCE, SHORT], padding=True, return_tensors="pt")
    one = trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=0, head=7)
    assert one.head == 7 and one.names == full.names
    assert [s.shape for s in one.steps] == [s.shape for s in full.steps]
    for name in ("scores", "masked_scores", "probs"):
        assert name in MAP_STEPS and one.tensor(name).shape == (2, 1, 16, 16)
        for batch in (0, 1):
            np.testing.assert_array_equal(head_matrix(one, name, 7, batch)[0], head_matrix(full, name, 7, batch)[0])
    np.testing.assert_array_equal(head_matrix(one, "q_heads", 3)[0], head_matrix(full, "q_heads", 3)[0])  # not a map
    a, b = query_key(one, 7, 4), query_key(full, 7, 4)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.probs, b.probs)
    with pytest.raises(ValueError, match="kept the maps of head 7 only, not of head 3"):
        head_matrix(one, "probs", 3)
    with pytest.raises(ValueError, match="head must be an integer from 0 to 11"):
        trace_layer(model, enc["input_ids"], layer=0, head=12)
    one_kept, full_kept = (
        sum(s.tensor.numel() * s.tensor.element_size() for s in t.steps if s.tensor is not None) for t in (one, full)
    )
    assert one_kept <= kept_bytes(model, 2, 16, 7) and full_kept <= kept_bytes(model, 2, 16)  # sized from above
    assert full_kept - one_kept == 3 * 11 * 2 * 16 * 16 * 4  # three maps of 11 heads fewer


def test_the_apps_trace_is_sized_before_the_work_one_head_past_the_bound_refused_past_it_even_so(monkeypatch):
    from attention.runs.bigrun import KeepsTooMuch
    from attention.tracing import trace
    from ui.compute import runs
    from ui.compute.models import get_model

    model = get_model("")[0]
    n = len(runs.encoded_input("", SENTENCE, "")[1].tokens)
    every, one = trace.kept_bytes(model, 1, n), trace.kept_bytes(model, 1, n, 4)
    monkeypatch.setattr(runs, "BIG_RUN_BYTES", every)
    assert runs.get_trace("", (SENTENCE,), "", 1, 4).head is None  # within the bound: every head's maps
    monkeypatch.setattr(runs, "BIG_RUN_BYTES", every - 1)
    assert runs.get_trace("", (SENTENCE,), "", 1, 4).head == 4
    monkeypatch.setattr(runs, "BIG_RUN_BYTES", one - 1)
    monkeypatch.setattr(trace, "trace_layer", lambda *a, **k: pytest.fail("the work started"))
    with pytest.raises(KeepsTooMuch, match=f"Tracing layer 1 at {n} tokens, for one head, keeps every map it makes"):
        runs.get_trace("", (SENTENCE,), "", 1, 5)


@pytest.mark.parametrize("view, layer", [("walk", 1), ("shapeflow", 3), ("qk", 4)])  # each its own traces
def test_the_views_on_a_trace_of_one_head_draw_the_chosen_head_and_follow_a_change(monkeypatch, view, layer):
    """Past the bound even for one head: the view's place says so. Past it for every head only: the chosen
    head's maps are traced, drawn, and traced again for another head when the head changes."""
    from test_app import figures, no_errors, start, titles

    from attention.tracing import trace
    from ui.compute import runs
    from ui.compute.models import get_model

    traced = []
    real = trace.trace_layer
    monkeypatch.setattr(trace, "trace_layer", lambda *a, **k: traced.append(k["head"]) or real(*a, **k))
    monkeypatch.setattr(runs, "BIG_RUN_BYTES", 1)
    at = start(view=view, layer=str(layer), head="7", walk="6", s=SHORT)
    no_errors(at)
    assert any("for one head, keeps every map it makes" in i.value for i in at.info) and traced == []
    n = len(runs.encoded_input("", SHORT, "")[1].tokens)
    monkeypatch.setattr(runs, "BIG_RUN_BYTES", trace.kept_bytes(get_model("")[0], 1, n, 0))
    for head in (7, 3):
        at.selectbox(key="head").select(head).run()
        no_errors(at)
        assert traced[-1] == head and not any("keeps every map" in i.value for i in at.info)
        assert any(f"head {head}" in " ".join(titles(fig)) for fig in figures(at))
