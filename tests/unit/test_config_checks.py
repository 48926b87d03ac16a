"""A config.json is checked against its weights and against sane limits before anything is built: a
config that claims a huge model beside tiny weights is refused at once, allocating nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, make_tiny

from attention import ModelLoadError, load_model

# each would need far more memory than the 3 GB the loading process may map
HUGE = {
    "hidden_size": 2**20,  # past the limit
    "num_hidden_layers": 100_000,  # past the limit
    "vocab_size": 10**9,  # past the limit
    "max_position_embeddings": 10**9,  # past the limit
}
WITHIN_LIMITS_BUT_NOT_THE_WEIGHTS = {"hidden_size": 32_768, "intermediate_size": 131_072, "num_hidden_layers": 8}


def edited(folder, **values):
    config = json.loads((folder / "config.json").read_text())
    config.update(values)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


LOAD_UNDER_3_GB = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from attention import ModelLoadError, load_model
start = time.perf_counter()
try:
    load_model(sys.argv[1])
    outcome = "loaded"
except ModelLoadError as err:
    outcome = "refused: " + str(err)
except MemoryError:
    outcome = "out of memory"
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - start}))
"""


def load_in_3_gb(folder) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", LOAD_UNDER_3_GB, str(folder)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "values", [*({k: v} for k, v in HUGE.items()), WITHIN_LIMITS_BUT_NOT_THE_WEIGHTS], ids=[*HUGE, "32768-wide"]
)
def test_a_huge_config_beside_tiny_weights_is_refused_at_once_in_3_gb(tmp_path, values):
    folder = edited(make_tiny(tmp_path / "tiny"), **values)
    result = load_in_3_gb(folder)
    assert result["outcome"].startswith("refused: "), result
    assert result["seconds"] < 5
    message = result["outcome"]
    assert "\n" not in message and "Traceback" not in message
    name = next(iter(values))
    assert name in message or "the config needs" in message or "has no tensor" in message


def test_the_weights_are_checked_from_their_headers_before_they_are_read(tmp_path, monkeypatch):
    from attention.load.checkpoint import SafetensorsWeights

    folder = edited(make_tiny(tmp_path / "tiny"), hidden_size=64, num_attention_heads=4)

    def never(*args, **kwargs):
        raise AssertionError("the weights were read before the shapes were checked")

    monkeypatch.setattr(SafetensorsWeights, "__getitem__", never)
    with pytest.raises(ModelLoadError, match=r"has shape \(32,\), the config needs \(64,\)"):
        load_model(folder)


def test_the_header_check_also_reads_bin_files_without_loading_them(tmp_path):
    folder = edited(make_tiny(tmp_path / "bin", safe=False), hidden_size=64)
    with pytest.raises(ModelLoadError, match="the config needs"):
        load_model(folder)


@pytest.mark.parametrize(
    "values, words",
    [
        ({"num_attention_heads": 5}, "not divisible"),
        ({"hidden_size": -32}, "positive"),
        ({"num_hidden_layers": 2.5}, "should be a int"),
        ({"hidden_act": "mystery"}, "hidden_act"),
        ({"max_position_embeddings": 10**9}, "max_position_embeddings"),
    ],
)
def test_inconsistent_configs_are_one_clear_error(tmp_path, values, words):
    folder = edited(make_tiny(tmp_path / "tiny"), **values)
    with pytest.raises(ModelLoadError) as err:
        load_model(folder)
    assert words in str(err.value) and "\n" not in str(err.value)
