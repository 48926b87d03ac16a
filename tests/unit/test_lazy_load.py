"""Loading holds a checkpoint once, not twice: the safetensors file is read tensor by tensor into a model
built on the meta device. Measured in a fresh process on a random BERT checkpoint of about 200 MB: the
peak resident memory while loading grows by less than 1.5x the file (reading the whole file into a state
dict, then copying it into a randomly initialised model, grows by 2x)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from families import make_family

ROOT = Path(__file__).resolve().parents[2]
# 8 layers with a feed-forward block 98,304 wide, 32 wide otherwise: 204 MB of float32 in 100-odd tensors,
# the largest 12.6 MB (as in real checkpoints, no one tensor is a large part of the file)
BIG = dict(num_hidden_layers=8, intermediate_size=98_304)

CHILD = r"""
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
from attention import load_model

def status_mb(field):  # VmRSS: resident now; VmHWM: the peak of this process's own memory
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024

def rss_mb():
    return status_mb("VmRSS")

torch.set_num_threads(1)
load_model(sys.argv[2])  # the imports and the tokenizer's machinery, on a tiny checkpoint first
before = rss_mb()
model, _ = load_model(sys.argv[3]) if sys.argv[4] == "default" else load_model(sys.argv[3], dtype=sys.argv[4])
# not getrusage's ru_maxrss: Linux carries it over from the parent (pytest, holding models) across exec
peak = status_mb("VmHWM")
table = model.layers[7].intermediate.weight
print(json.dumps({"growth_mb": peak - before, "kept_mb": rss_mb() - before, "dtype": str(table.dtype),
                  "corner": table[-1, :4].float().tolist()}))
"""


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A tiny BERT masked LM, and a big one (BIG), both random, as transformers saves them."""
    from safetensors import safe_open

    tiny = make_family(tmp_path_factory.mktemp("tiny"), "bert")
    big = make_family(tmp_path_factory.mktemp("big"), "bert", **BIG)
    with safe_open(str(big / "model.safetensors"), "pt") as f:
        corner = f.get_tensor("bert.encoder.layer.7.intermediate.dense.weight")[-1, :4].tolist()
    return tiny, big, (big / "model.safetensors").stat().st_size / 2**20, corner


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("dtype", ["default", "bfloat16"])
def test_loading_holds_the_checkpoint_once(checkpoints, dtype):
    tiny, big, file_mb, corner = checkpoints
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), str(tiny), str(big), dtype],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"\n{dtype}: checkpoint {file_mb:.0f} MB, peak growth {result['growth_mb']:.0f} MB, "
        f"kept {result['kept_mb']:.0f} MB"
    )
    half = dtype == "bfloat16"
    assert result["dtype"] == ("torch.bfloat16" if half else "torch.float32")
    # the weights are really there (the measure is of a real load), cast when asked
    torch.testing.assert_close(
        torch.tensor(result["corner"]), torch.tensor(corner), atol=1e-2 if half else 0, rtol=1e-2 if half else 0
    )
    assert result["kept_mb"] >= (0.45 if half else 0.9) * file_mb
    assert result["growth_mb"] < 1.5 * file_mb
