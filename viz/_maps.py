"""Attention maps as a notebook hands them over, made into one (n_layers, H, L, S) array, and sent compactly."""

import numpy as np

# Above this many bytes of float32 maps a figure sends whole percents as uint8 instead: plotly.js
# itself is 4.8 MB of an offline HTML file, and 6 layers × 12 heads × 128² float32 maps would add
# 6.3 MB of base64 to it; as uint8 they add 1.6 MB.
FLOAT32_BUDGET = 2_000_000


def layer_maps(attentions, batch: int = 0) -> np.ndarray:
    """One sequence's maps as a float32 (n_layers, H, L, S) array.

    ``attentions`` is what a model returns as ``outputs.attentions`` — a tuple (or list) with one
    (batch, H, L, S) tensor per layer, from transformers or from ``attention`` — or an array laid
    out (n_layers, H, L, S) as ``attention.runs.run`` keeps it, or (n_layers, batch, H, L, S). An object
    with an ``attentions`` attribute (a model output, a ``SentenceRun``) stands for that attribute.
    ``batch`` picks the sequence where there is a batch axis.
    """
    if hasattr(attentions, "attentions"):
        attentions = attentions.attentions
    if attentions is None:
        raise ValueError("no attentions given: run the model with output_attentions=True")
    if isinstance(attentions, (tuple, list)):
        if not attentions:
            raise ValueError("no attentions given: the model returned no layers")
        layers = [_numpy(a) for a in attentions]
        layers = [a[batch] if a.ndim == 4 else a for a in layers]  # (H, L, S)
        if any(a.ndim != 3 for a in layers):
            raise ValueError("each layer's attention must be (batch, heads, L, S) or (heads, L, S)")
        maps = np.stack(layers)
    else:
        maps = _numpy(attentions)
        maps = maps[:, batch] if maps.ndim == 5 else maps
    if maps.ndim != 4:
        raise ValueError(f"expected attentions (n_layers, heads, L, S), got shape {maps.shape}")
    return maps.astype(np.float32, copy=False)


def _numpy(array) -> np.ndarray:
    if hasattr(array, "detach"):  # a torch tensor, of any dtype or device
        return array.detach().float().cpu().numpy()
    return np.asarray(array)


def is_compact(n_cells: int, compact: bool | None) -> bool:
    """Whether ``n_cells`` weights go as whole percents: when asked, or by default past ``FLOAT32_BUDGET``."""
    return n_cells * 4 > FLOAT32_BUDGET if compact is None else compact


def encode(weights: np.ndarray, compact: bool) -> np.ndarray:
    """Weights in [0, 1] as float32, or, compact, as whole percents in uint8 (0–100)."""
    if compact:
        return np.rint(np.clip(weights, 0.0, 1.0) * 100).astype(np.uint8)
    return np.asarray(weights, dtype=np.float32)


def decode(z: np.ndarray) -> np.ndarray:
    """The weights a trace's ``z`` stands for (the inverse of ``encode``, to half a percent when compact)."""
    z = np.asarray(z)
    return z.astype(np.float32) / 100 if z.dtype == np.uint8 else z.astype(np.float32)


def colour_axis(compact: bool, colorscale: str, zmax: float = 1.0) -> dict:
    """One colour bar shared by every map: weights 0 to ``zmax``, labelled in percent."""
    scale = 100 if compact else 1
    bar = dict(title=dict(text="weight"), thickness=14)
    bar.update(ticksuffix="%" if compact else "", tickformat="" if compact else ".0%")
    return dict(colorscale=colorscale, cmin=0, cmax=zmax * scale, colorbar=bar)


def hover_weight(compact: bool) -> str:
    """How hover text writes a cell's weight: "37%" either way, a decimal more when exact."""
    return "%{z}%" if compact else "%{z:.1%}"
