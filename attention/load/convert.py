"""A checkpoint's tensors into our model: renamed as the family declares (attention/models/), then
copied strictly: every tensor of the model given exactly once, with its shape, or a ModelLoadError
naming the first one at fault.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from itertools import chain

import torch

from ..errors import ModelLoadError
from ..models import FAMILIES, Family

LAYERS_HINT = " (does num_hidden_layers in config.json match the weights?)"
_OLD_NORM_NAMES = re.compile(r"LayerNorm\.(gamma|beta)$")  # the original TensorFlow checkpoints' names


def convert_checkpoint(
    family: Family,
    checkpoint: Mapping[str, torch.Tensor],
    origins: dict[str, str] | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Rename a checkpoint's tensors to this package's names, as `family` declares them.

    Accepts the family's base-model checkpoints and task models whose base model sits under the
    family's prefix ("bert.", "transformer." ...). Returns (renamed tensors as `dtype` floats on
    `device`, names of the ignored task-head tensors and buffers). Weights stored (in, out) are
    given transposed (views); a weight left out because it is tied to a head's (GPT-2's wte and lm_head) is taken
    from the head; a weight the family declares `shared` is given under both its names. A tensor that
    is neither part of the model nor a known head, or one given twice, is an error naming it.
    `origins`, when given, receives each of our names with the checkpoint's name it came from.
    `checkpoint` may read its tensors lazily (read_checkpoint's safetensors do): each is asked for
    once, when it is converted, and an ignored one is never read.
    """
    origins = {} if origins is None else origins
    prefix = family.prefix

    def cast(tensor: torch.Tensor) -> torch.Tensor:  # no copy when it is already as asked
        if tensor.is_floating_point():
            return tensor.to(device=device, dtype=dtype)
        return tensor.to(device=device)

    prefixed = any(name.startswith(prefix) for name in checkpoint)
    renamed, ignored = {}, []
    for name in checkpoint:
        inside = not prefixed or name.startswith(prefix)
        key = _OLD_NORM_NAMES.sub(
            lambda m: "LayerNorm." + {"gamma": "weight", "beta": "bias"}[m.group(1)],
            name[len(prefix) :] if prefixed and inside else name,
        )
        target = family.rename(key) if inside else None
        if target is None:
            if not family.is_ignored(key):
                raise ModelLoadError(f"the checkpoint has a tensor this {family.title} model does not know: '{name}'")
            ignored.append(name)
            continue
        if target in renamed:
            raise ModelLoadError(f"the checkpoint gives tensor '{target}' twice (the second time as '{name}')")
        tensor = cast(checkpoint[name])  # read now, one tensor at a time
        if family.is_transposed(key):
            # (in, out) -> (out, in) as a view of the storage as saved, not a transposed copy: F.linear then
            # multiplies by the (in, out) matrix, as GPT-2's Conv1D does (one token's projection 0.48 vs 0.52 ms)
            tensor = tensor.t()
        renamed[target] = tensor
        origins[target] = name
    for ours, head_name in family.tied:
        if ours not in renamed and head_name in checkpoint:
            renamed[ours] = cast(checkpoint[head_name])
            origins[ours] = head_name
    for ours, other in family.shared:  # the same tensor, not a copy: the model keeps one
        if ours in renamed:
            renamed[other] = renamed[ours]
            origins[other] = origins.get(ours, ours)
    return renamed, ignored


def map_state_dict(checkpoint: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """A BERT checkpoint's tensors under this package's names (see convert_checkpoint)."""
    return convert_checkpoint(FAMILIES["bert"], checkpoint)


def check_tensors(
    tensors: dict[str, torch.Tensor],
    expected: dict[str, torch.Tensor],
    what: str = "the checkpoint",
    prefix: str = "",
    unknown_hint: str = "",
    name_of: Callable[[str], str] | None = None,
) -> None:
    """Strict: every expected tensor present, none unknown, every shape equal; else a ModelLoadError
    naming the first key at fault (as `prefix` + key, or as `name_of(key)` says) and `what` was being read."""
    name_of = name_of or (lambda key: prefix + key)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise ModelLoadError(
            f"{what} has no tensor '{name_of(missing[0])}'"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise ModelLoadError(f"{what} has a tensor this model does not know: '{name_of(extra[0])}'{unknown_hint}")
    for key, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[key].shape):
            raise ModelLoadError(
                f"tensor '{name_of(key)}' has shape {tuple(tensor.shape)}, "
                f"the config needs {tuple(expected[key].shape)}"
            )


def copy_weights(model: torch.nn.Module, tensors: dict[str, torch.Tensor], assign: bool = False) -> None:
    """Copy every tensor into the model; a missing, extra or mis-shaped one names the key.
    With `assign` the model takes the tensors themselves (their dtype and device) instead of copies:
    for a model built on the meta device, whose every tensor must then be given."""
    check_tensors(tensors, model.state_dict(), unknown_hint=LAYERS_HINT)
    model.load_state_dict(tensors, strict=True, assign=assign)
    left = next((name for name, t in chain(model.named_parameters(), model.named_buffers()) if t.is_meta), None)
    if left is not None:
        raise ModelLoadError(f"the checkpoint gives no data for '{left}'")
