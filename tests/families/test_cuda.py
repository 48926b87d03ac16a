"""On a CUDA GPU: every family loaded with load_model(device="cuda") in float32 and in bfloat16 gives the
numbers of transformers' eager model on the same GPU in the same dtype, keeps its weights and outputs
there, and the app's runs of it (ui/compute/runs.py: run_sentence, run_padded_batch, fused layers and kept
rows) give the CPU model's results, as float32 numpy arrays on the CPU. The paths beyond the forward pass are
tests/families/test_cuda_paths.py's.

Skipped where torch finds no CUDA GPU (CI, laptops): run it on a machine that has one."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import CONFIGS, make_family
from test_precision import check_fused_layers_and_kept_rows, worst

from attention import load_bert, load_model
from attention.runs.inputs import on_model_device
from attention.runs.run import run_padded_batch, run_sentence, stack_attentions

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available())")

FAMILIES = tuple(CONFIGS)  # bert, roberta, distilbert, electra, gpt2, llama, mistral, qwen2
TOKEN_TYPES = ("bert", "roberta", "electra")  # the families whose transformers model takes token_type_ids
SENTENCES = ["The animal didn't cross the street because it was too tired.", "The cat sat on the mat."]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# ours against transformers on the same GPU in the same dtype, (hidden states, maps). float32: as
# tests/families/test_families.py on the CPU, in absolute terms. bfloat16: the hidden states relative to each layer's
# largest value (a rounding step is 2^-8 of a value, 3.9e-3), the maps as tests/unit/test_precision.py (ours
# are float32, transformers' rounded to bfloat16). On the CPU and on an H100 the hidden states of every
# family but GPT-2 come out equal, and the maps within 1e-3 (GPT-2's 2.9e-3).
TOL = {"float32": (1e-5, 1e-6), "bfloat16": (2e-3, 4e-3)}
# transformers' GPT-2 takes its softmax in bfloat16 (the others in float32, as ours does for every family):
# its hidden states are 7.4e-3 of the largest value off ours (on the CPU and on an H100), about as far as
# float32 weights are from them (8.2e-3 on the CPU)
GPT2_BF16_HIDDEN_TOL = 2e-2
# the GPU's float32 against the CPU's: the same sums in another order
CPU_TOL = dict(atol=1e-5, rtol=0)
BF16_TOL = 2e-2  # a bfloat16 model's maps against the float32 model's (tests/app/test_app_precision.py)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny random checkpoint of each family (its task class, as tests/helpers/families.py saves it)."""
    return {family: make_family(tmp_path_factory.mktemp(family), family) for family in FAMILIES}


def on_gpu(model) -> bool:
    tensors = [*model.parameters(), *model.buffers()]
    return bool(tensors) and all(t.device.type == "cuda" for t in tensors)


def their_model(folder, dtype: torch.dtype):
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(folder), attn_implementation="eager", dtype=dtype).to("cuda").eval()


# ---- the model itself -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_on_the_gpu_matches_transformers_there(folders, family, dtype):
    ours, tokenizer = load_model(folders[family], device="cuda", dtype=dtype)
    assert on_gpu(ours), "a weight or buffer stayed off the GPU"
    assert {p.dtype for p in ours.parameters()} == {DTYPES[dtype]}
    assert ours.load_report.device.startswith("cuda") and ours.load_report.dtype == dtype
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    ids, mask, types = on_model_device(ours, batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
    theirs = their_model(folders[family], DTYPES[dtype])
    extra = {"token_type_ids": types} if family in TOKEN_TYPES else {}
    with torch.inference_mode():
        mine = ours(ids, mask, types)
        ref = theirs(ids, attention_mask=mask, output_attentions=True, output_hidden_states=True, **extra)
    assert all(h.device.type == "cuda" and h.dtype == DTYPES[dtype] for h in mine.hidden_states)
    assert all(a.device.type == "cuda" and a.dtype == torch.float32 for a in mine.attentions)  # maps in float32
    assert len(mine.attentions) == len(ref.attentions) and len(mine.hidden_states) == len(ref.hidden_states)
    keep, half = mask.bool(), dtype != "float32"
    hidden = worst(mine.hidden_states, ref.hidden_states, keep, relative=half)
    maps = worst(mine.attentions, ref.attentions, keep, maps=True)
    print(
        f"\n{family} {dtype} on {torch.cuda.get_device_name()}: max|Δ hidden| {hidden:.2e}"
        f"{' of the largest value' if half else ''}, max|Δ map| {maps:.2e}"
    )
    hidden_tol, map_tol = TOL[dtype]
    if family == "gpt2" and half:
        hidden_tol = GPT2_BF16_HIDDEN_TOL
    assert hidden <= hidden_tol and maps <= map_tol, (family, dtype, hidden, maps)
    for a in mine.attentions:  # padding keys get nothing, and each real row sums to 1 (softmax in float32)
        for b, k in enumerate(keep):
            assert torch.all(a[b][:, :, ~k] == 0)
            sums = a[b][:, k].sum(-1)
            torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)


def test_bfloat16_tolerance_tells_the_dtypes_apart_on_the_gpu(folders):
    """float32 weights on the GPU are off from transformers' bfloat16 model by more than the bfloat16 tolerance."""
    ours, tokenizer = load_model(folders["llama"], device="cuda", dtype="float32")
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    ids, mask = on_model_device(ours, batch["input_ids"], batch["attention_mask"])
    with torch.inference_mode():
        mine = ours(ids, mask)
        ref = their_model(folders["llama"], torch.bfloat16)(ids, attention_mask=mask, output_hidden_states=True)
    assert worst(mine.hidden_states, ref.hidden_states, mask.bool(), relative=True) > TOL["bfloat16"][0]


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda", 0), "auto"])
def test_every_way_of_asking_for_the_gpu(folders, device):
    model, _ = load_model(folders["bert"], device=device, dtype="auto")
    assert on_gpu(model)
    expected = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16  # "auto" on a GPU
    assert {p.dtype for p in model.parameters()} == {expected}
    assert load_bert(folders["bert"], device=device)[0].load_report.device.startswith("cuda")


@pytest.mark.parametrize("how", ["pytorch_model.bin", "shards"])
def test_bin_and_sharded_checkpoints_load_onto_the_gpu(tmp_path, how):
    folder = make_family(
        tmp_path / how, "qwen2", safe=how != "pytorch_model.bin", max_shard_size="20KB" if how == "shards" else None
    )
    model, tokenizer = load_model(folder, device="cuda", dtype="bfloat16")
    assert on_gpu(model)
    assert model.load_report.weights_file == {"shards": "model.safetensors.index.json"}.get(how, how)
    cpu, _ = load_model(folder)
    expected = run_sentence(cpu, tokenizer, SENTENCES[0]).attentions
    assert np.abs(run_sentence(model, tokenizer, SENTENCES[0]).attentions - expected).max() <= BF16_TOL


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", ["llama", "bert"])
def test_fused_layers_and_kept_rows_on_the_gpu(folders, family, dtype):
    """maps_for and rows (big runs, coreference scoring) run torch's fused attention on the GPU. The kept rows'
    scores come from another cuBLAS kernel than the full map's (its choice goes by shape): they are compared
    within the rounding test_precision.rows_rounding derives, which holds with TF32 off (torch's default)."""
    model, tokenizer = load_model(folders[family], device="cuda", dtype=dtype)
    assert on_gpu(model)
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # float32 products in float32, not TF32's 10-bit mantissa
    try:
        check_fused_layers_and_kept_rows(model, tokenizer, hidden_tol=1e-5 if dtype == "float32" else 0.05)
    finally:
        torch.set_float32_matmul_precision(precision)


# ---- what the app computes with a GPU model (ui/compute/runs.py, ui/compute/computations.py, ui/coref/coref_data.py)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", FAMILIES)
def test_runs_and_batches_come_back_as_the_cpu_models(folders, family, dtype):
    """get_run's run_sentence (and its causal what-if), get_batch's run_padded_batch: float32 numpy arrays on
    the CPU, the CPU model's maps (to float32's precision, or to bfloat16's rounding)."""
    gpu, tokenizer = load_model(folders[family], device="cuda", dtype=dtype)
    cpu, _ = load_model(folders[family])
    tol = CPU_TOL["atol"] if dtype == "float32" else BF16_TOL
    for causal in (False, True):
        run = run_sentence(gpu, tokenizer, SENTENCES[0], causal=causal)
        assert isinstance(run.attentions, np.ndarray) and run.attentions.dtype == np.float32
        assert not run.attentions.flags.writeable
        expected = run_sentence(cpu, tokenizer, SENTENCES[0], causal=causal).attentions
        assert run.attentions.shape == expected.shape
        assert np.abs(run.attentions - expected).max() <= tol, (family, dtype, causal)
    pair = run_sentence(gpu, tokenizer, SENTENCES[0], SENTENCES[1])
    assert np.abs(pair.attentions - run_sentence(cpu, tokenizer, SENTENCES[0], SENTENCES[1]).attentions).max() <= tol
    batch = run_padded_batch(gpu, tokenizer, SENTENCES)
    expected = run_padded_batch(cpu, tokenizer, SENTENCES)
    assert batch.attentions.dtype == np.float32 and batch.tokens == expected.tokens
    np.testing.assert_array_equal(batch.mask, expected.mask)
    assert np.abs(batch.attentions - expected.attentions).max() <= tol


def test_stack_attentions_takes_gpu_maps_of_any_dtype():
    maps = [torch.rand(2, 3, 5, 5, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    expected = np.stack([m[1].float().cpu().numpy() for m in maps])
    stacked = stack_attentions(maps, batch=1)
    assert stacked.dtype == np.float32 and stacked.shape == (4, 3, 5, 5)
    np.testing.assert_array_equal(stacked, expected)
    assert maps == [None] * 4  # each layer let go once copied
