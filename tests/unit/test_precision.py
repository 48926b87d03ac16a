"""load_model(device=, dtype=): half-precision weights follow transformers' eager model in the same dtype
(softmax and kept maps in float32, rotary cos/sin and RMSNorm as transformers computes them); the default
stays the CPU in float32; a GPU asked for where there is none is one clear ModelLoadError."""

import pytest
import torch
from families import make_family, reference

import attention.load.loading as loading
from attention import ModelLoadError, load_model
from attention.core.request import MapRequest
from attention.runs.inputs import on_model_device
from attention.runs.run import run_padded_batch
from attention.tracing.trace import trace_layer

SENTENCES = ["The animal didn't cross the street because it was too tired.", "The cat sat on the mat."]
# bfloat16 keeps 8 bits of mantissa: a rounding step is 2^-8 of a value. Our hidden states match transformers'
# bfloat16 model within HIDDEN_TOL (they come out equal here); the same weights in float32 differ from it by
# about 1e-2, so the test tells the two apart. Our maps are float32, transformers' rounded to bfloat16.
HIDDEN_TOL, MAP_TOL = 2e-3, 4e-3


@pytest.fixture(scope="module", params=[("llama", {"num_key_value_heads": 2}), ("bert", {})], ids=["llama", "bert"])
def folder(request, tmp_path_factory):
    family, overrides = request.param
    return make_family(tmp_path_factory.mktemp(family), family, **overrides)


def their_model(folder, dtype):
    from transformers import AutoModel

    if dtype == torch.float32:
        return reference(folder)
    return AutoModel.from_pretrained(str(folder), attn_implementation="eager", dtype=dtype).eval()


def run_both(folder, dtype):
    ours, tokenizer = load_model(folder, dtype=dtype)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        mine = ours(batch["input_ids"], batch["attention_mask"])
        theirs = their_model(folder, dtype)(
            batch["input_ids"],
            attention_mask=batch["attention_mask"],
            output_attentions=True,
            output_hidden_states=True,
        )
    return ours, batch["attention_mask"].bool(), mine, theirs


def worst(ours, theirs, keep, maps=False, relative=False) -> float:
    """max |Δ| over the real positions (and, for maps, the real keys) of every layer; `relative`: each
    layer's max |Δ| over its largest |value| (theirs)."""
    out = 0.0
    for a, r in zip(ours, theirs):
        for b, k in enumerate(keep):
            x, y = (a[b][:, k][:, :, k], r[b][:, k][:, :, k]) if maps else (a[b, k], r[b, k])
            difference = (x.float() - y.float()).abs().max().item()
            out = max(out, difference / y.float().abs().max().item() if relative else difference)
    return out


def test_bfloat16_weights_match_transformers_bfloat16_and_keep_float32_maps(folder):
    ours, keep, mine, theirs = run_both(folder, torch.bfloat16)
    assert {p.dtype for p in ours.parameters()} == {torch.bfloat16}
    assert ours.load_report.dtype == "bfloat16"
    assert all(h.dtype == torch.bfloat16 for h in mine.hidden_states)
    assert all(a.dtype == torch.float32 for a in mine.attentions)
    hidden, maps = (
        worst(mine.hidden_states, theirs.hidden_states, keep),
        worst(mine.attentions, theirs.attentions, keep, maps=True),
    )
    print(f"\n{ours.config.model_type} bfloat16: max|Δ hidden| {hidden:.2e}, max|Δ map| {maps:.2e}")
    assert hidden <= HIDDEN_TOL and maps <= MAP_TOL, (hidden, maps)
    # the maps are softmaxed in float32: each real row sums to 1 to float32's precision
    for a in mine.attentions:
        sums = a[0].sum(-1)  # (H, L) of the longer sentence
        torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)


def test_the_same_weights_in_float32_are_told_apart(folder):
    """The tolerance above is tight enough to see the dtype: float32 weights are off from transformers' bfloat16."""
    ours, tokenizer = load_model(folder)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        mine = ours(batch["input_ids"], batch["attention_mask"])
        theirs = their_model(folder, torch.bfloat16)(
            batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True
        )
    assert {p.dtype for p in ours.parameters()} == {torch.float32}  # the default
    assert worst(mine.hidden_states, theirs.hidden_states, batch["attention_mask"].bool()) > HIDDEN_TOL


def check_fused_layers_and_kept_rows(ours, tokenizer, hidden_tol: float) -> None:
    """maps_for and rows (big runs, coreference scoring) run torch's fused attention: the kept rows are those
    of the full map, in float32 and on the model's device; the fused run's hidden states are the explicit
    run's within `hidden_tol` and exactly the rows' run's. tests/families/test_cuda.py runs it on a GPU."""
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    ids, mask = on_model_device(ours, batch["input_ids"], batch["attention_mask"])
    rows = torch.tensor([[0, 2], [1, 1]])  # on the CPU: the model moves them to its device
    with torch.no_grad():
        full = ours(ids, mask)
        fused = ours(ids, mask, request=MapRequest(()))
        picked = ours(ids, mask, request=MapRequest(rows=rows))
        # layer i's full map after the same fused layers before it: the same inputs as the rows' run
        one_full = [
            ours(ids, mask, request=MapRequest({i})).attentions[i] for i in range(ours.config.num_hidden_layers)
        ]
    assert fused.attentions == (None,) * ours.config.num_hidden_layers
    assert worst(fused.hidden_states, full.hidden_states, mask.bool()) <= hidden_tol
    for a, f in zip(picked.hidden_states, fused.hidden_states):
        assert torch.equal(a, f)
    rows = rows.to(ids.device)
    for layer, (a, f) in enumerate(zip(picked.attentions, one_full)):
        assert a.device == ids.device and a.dtype == f.dtype == torch.float32
        expected = torch.stack([f[b][:, rows[b]] for b in range(2)])  # (B, H, P, S)
        torch.testing.assert_close(a, expected, atol=rows_rounding(ours, ids, mask, layer), rtol=0)


def rows_rounding(model, ids: torch.Tensor, mask: torch.Tensor, layer: int) -> float:
    """How far rounding alone may move a kept row (B, H, P, S) from the same row of the full map (B, H, L, S).

    Both take the same q and k, but the rows' scores are a (P, d)·(d, S) product, the map's an (L, d)·(d, S) one:
    on a GPU cuBLAS picks its kernel by shape, and another kernel sums each score's d terms in another order
    (on the CPU they come out equal to the bit, which nothing promises). Each way, a score is within
    ½(d + 2)·eps·Σ_i |q_i k_i|·scaling of the exact value (d terms, the scaling and the rounding to the weights'
    dtype, eps that dtype's; TF32 off, or float32's eps would not hold), so two ways differ by at most
    (d + 2)·eps·A, A the largest such sum. A probability moves by at most half its row's largest score change
    (∂p_j/∂s_i = p_j(δ_ij - p_i)), and float32's softmax over S keys rounds each by (S + 2)·eps₃₂/2 a way.
    Tiny Llama, layer 1: A = 1.8 and S = 27 give 1.1e-6 + 3.5e-6 in float32, 0.07 in bfloat16 (so float32's
    case is the one that tells a misplaced row, 0.03-0.24 away, from rounding)."""
    trace = trace_layer(model, ids, mask, layer=layer)
    q = [s.tensor for s in trace.steps if s.name.startswith("q_") and s.tensor is not None and s.tensor.dim() == 4]
    k = [s.tensor for s in trace.steps if s.name.startswith("k_") and s.tensor is not None and s.tensor.dim() == 4]
    q, k = q[-1].double(), k[-1].double()  # the last of each: what the scores were made of (B, H, L, d), (B, H, S, d)
    k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)  # grouped keys, each serving its query heads
    terms = float((q.abs() @ k.abs().transpose(-2, -1)).max()) * trace.scaling
    d, S = q.size(-1), k.size(2)
    eps, eps32 = torch.finfo(next(model.parameters()).dtype).eps, torch.finfo(torch.float32).eps
    return (d + 2) * eps * terms / 2 + (S + 2) * eps32


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_layers_and_kept_rows(folder, dtype):
    hidden_tol = 1e-5 if dtype == "float32" else 0.05  # the fused kernel's sums in another order: float32's, bfloat16's
    check_fused_layers_and_kept_rows(*load_model(folder, dtype=dtype), hidden_tol=hidden_tol)


def test_padded_batch_views_read_half_models(folder):
    ours, tokenizer = load_model(folder, dtype=torch.float16)
    padded = run_padded_batch(ours, tokenizer, SENTENCES)
    assert padded.attentions.dtype.name == "float32"
    assert {p.dtype for p in ours.parameters()} == {torch.float16}


def test_device_argument_on_cpu(folder, monkeypatch):
    model, _ = load_model(folder, device="cpu", dtype="float32")
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    assert (model.load_report.device, model.load_report.dtype) == ("cpu", "float32")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model, _ = load_model(folder, device="auto", dtype="auto")  # no GPU: the CPU in float32
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    assert {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda")])
def test_cuda_without_a_gpu_is_one_clear_error(folder, monkeypatch, device):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ModelLoadError, match="no CUDA GPU") as err:
        load_model(folder, device=device)
    assert "\n" not in str(err.value) and "device='cpu'" in str(err.value)


def test_auto_takes_the_gpu_in_bfloat16_when_there_is_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    device = loading.resolve_device("auto")
    assert device.type == "cuda"
    assert loading.resolve_dtype("auto", device) == torch.bfloat16
    assert loading.resolve_dtype(None, device) == torch.float32  # never half unless asked


@pytest.mark.parametrize(
    "device, dtype, words",
    [
        ("mps", None, "only 'cpu' and 'cuda'"),
        ("banana", None, "device must"),
        ("cpu", "int8", "dtype must"),
        ("cpu", torch.float64, "dtype must"),
    ],
)
def test_bad_device_or_dtype_is_one_clear_error(folder, device, dtype, words):
    with pytest.raises(ModelLoadError, match=words):
        load_model(folder, device=device, dtype=dtype)
