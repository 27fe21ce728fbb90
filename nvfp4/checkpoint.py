"""nvfp4.load_experts: an MoE layer's NVFP4 experts read from a checkpoint into an nvfp4.Experts.

    experts = nvfp4.load_experts("model.safetensors", "model.layers.3.mlp.experts", device="cuda")

The source is a .safetensors file, a directory of .safetensors shards or a state dict. Expert e's
tensors are {prefix}.{e}.{proj}.{name}, with proj gate_proj/up_proj/down_proj or w1/w3/w2, in
ModelOpt's NVFP4 format or compressed-tensors' nvfp4-pack-quantized (the table is in docs/MOE.md).
Of a file or shards only the tensors under the prefix are read.
"""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import torch

from .experts import Experts

NAMINGS = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))  # each (gate, up, down)


class Format(NamedTuple):
    """A checkpoint format's tensor names per projection (both call the block scales weight_scale)."""

    name: str
    weight: str
    weight_scale_2: str
    input_scale: str
    reciprocal_scales: bool  # global scales stored as quantization scales, 1 / the dequantization scale


FORMATS = (
    Format("ModelOpt NVFP4", "weight", "weight_scale_2", "input_scale", reciprocal_scales=False),
    Format("compressed-tensors nvfp4-pack-quantized", "weight_packed", "weight_global_scale", "input_global_scale", reciprocal_scales=True),
)


def load_experts(source, prefix: str, *, device=None, experts: int | None = None) -> Experts:
    """The experts 0..E-1 under `prefix` of `source` (a .safetensors file, a directory of them, or a
    mapping name -> tensor), as an nvfp4.Experts on `device` (default: where they are read, the CPU
    for files). The projection naming and the format are told by the tensor names; `experts`, where
    given, is the count the layer must have."""
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(
            f"nvfp4.load_experts: prefix must be the experts' name prefix, such as 'model.layers.0.mlp.experts', got {prefix!r}"
        )
    tensors = _tensors_under(source, prefix)
    named = _expert_tensor_names(tensors, prefix)
    count = _expert_count({e for e, _, _ in named}, prefix, experts)
    gate, up, down = _naming({proj for _, proj, _ in named}, prefix)
    fmt = _format({name for _, proj, name in named if proj in (gate, up, down)}, prefix)

    def keys(projs, name):
        return [f"{prefix}.{e}.{proj}.{name}" for proj in projs for e in range(count)]

    def global_scales(projs, name):
        scales = _scalars(tensors, keys(projs, name))
        # compressed-tensors stores 448 * 6 / amax, the reciprocal of the dequantization scale
        # Experts takes (vLLM converts the same way: w13_scale_2 = 1.0 / w13_weight_global_scale).
        return 1.0 / scales if fmt.reciprocal_scales else scales

    w13 = _gate_then_up(_stacked(tensors, keys((gate, up), fmt.weight), torch.uint8), count).flatten(1, 2)
    w13_scale = _gate_then_up(_stacked(tensors, keys((gate, up), "weight_scale"), torch.float8_e4m3fn), count).flatten(1, 2)
    w13_weight_scale_2 = _gate_then_up(global_scales((gate, up), fmt.weight_scale_2), count)
    w13_input_scale = _gate_then_up(global_scales((gate, up), fmt.input_scale), count)
    w2 = _stacked(tensors, keys((down,), fmt.weight), torch.uint8)
    w2_scale = _stacked(tensors, keys((down,), "weight_scale"), torch.float8_e4m3fn)
    w2_weight_scale_2 = global_scales((down,), fmt.weight_scale_2)
    w2_input_scale = global_scales((down,), fmt.input_scale)
    loaded = (w13, w13_scale, w13_weight_scale_2, w13_input_scale, w2, w2_scale, w2_weight_scale_2, w2_input_scale)
    return Experts(*(t if device is None else t.to(device) for t in loaded))


def _tensors_under(source, prefix: str) -> dict:
    """name -> tensor of every tensor named {prefix}.*; of files, only those are read."""
    start = prefix + "."
    if isinstance(source, Mapping):
        return {key: t for key, t in source.items() if key.startswith(start)}
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(
            f"nvfp4.load_experts: source must be a path (a .safetensors file or a directory of them) or a "
            f"mapping name -> tensor, got {type(source).__name__}"
        )
    from safetensors import safe_open  # here, so that state dicts and the rest of nvfp4 need no safetensors

    path = Path(source)
    shards = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not shards:
        raise ValueError(f"nvfp4.load_experts: no *.safetensors files in {path}")
    tensors, shard_of = {}, {}
    for shard in shards:
        with safe_open(str(shard), framework="pt") as f:
            for key in f.keys():
                if not key.startswith(start):
                    continue
                if key in tensors:
                    raise ValueError(f"nvfp4.load_experts: {key} is in two shards, {shard_of[key].name} and {shard.name}")
                tensors[key], shard_of[key] = f.get_tensor(key), shard
    return tensors


def _expert_tensor_names(tensors: dict, prefix: str) -> list:
    """(expert, projection, name) of every key {prefix}.{expert}.{projection}.{name}."""
    parts = [key[len(prefix) + 1 :].split(".") for key in tensors]
    return [(int(e), proj, name) for e, proj, name in (p for p in parts if len(p) == 3 and p[0].isdigit())]


def _expert_count(indices: set, prefix: str, expected: int | None) -> int:
    if not indices:
        raise ValueError(f"nvfp4.load_experts: no tensors named {prefix}.<expert>.<projection>.<name> in the source")
    count = max(indices) + 1
    missing = sorted(set(range(count)) - indices)
    if missing:
        raise ValueError(
            f"nvfp4.load_experts: {prefix} has no expert {', '.join(map(str, missing))} (found {len(indices)} experts in 0..{count - 1})"
        )
    if expected is not None and count != expected:
        raise ValueError(f"nvfp4.load_experts: {prefix} has {count} experts, expected {expected}")
    return count


def _naming(projs: set, prefix: str) -> tuple:
    present = [naming for naming in NAMINGS if projs & set(naming)]
    if len(present) != 1:
        raise ValueError(
            f"nvfp4.load_experts: {prefix}: expected the projections gate_proj/up_proj/down_proj or w1/w3/w2 "
            f"(one naming, not both); found {', '.join(sorted(projs))}"
        )
    return present[0]


def _format(names: set, prefix: str) -> Format:
    present = [fmt for fmt in FORMATS if names & {fmt.weight, fmt.weight_scale_2, fmt.input_scale}]
    if len(present) != 1:
        expected = " or ".join(f"{fmt.name} ({fmt.weight}, weight_scale, {fmt.weight_scale_2}, {fmt.input_scale})" for fmt in FORMATS)
        raise ValueError(f"nvfp4.load_experts: {prefix}: expected the tensors of {expected}, one format; found {', '.join(sorted(names))}")
    return present[0]


def _tensor(tensors: dict, key: str, dtype: torch.dtype) -> torch.Tensor:
    if key not in tensors:
        raise ValueError(f"nvfp4.load_experts: {key} is missing")
    t = tensors[key]
    if not isinstance(t, torch.Tensor) or t.dtype != dtype:
        raise ValueError(f"nvfp4.load_experts: {key} has dtype {getattr(t, 'dtype', type(t).__name__)}, expected {dtype}")
    return t


def _stacked(tensors: dict, keys: list, dtype: torch.dtype) -> torch.Tensor:
    """The tensors of `keys`, one shape and dtype, stacked: [len(keys), ...]."""
    stack = [_tensor(tensors, key, dtype) for key in keys]
    for key, t in zip(keys, stack):
        if t.shape != stack[0].shape:
            raise ValueError(f"nvfp4.load_experts: {key} has shape {tuple(t.shape)}, {keys[0]} {tuple(stack[0].shape)}")
    return torch.stack(stack)


def _scalars(tensors: dict, keys: list) -> torch.Tensor:
    """The float32 scalars of `keys` (each of shape [] or [1]) as float32 [len(keys)]."""
    scalars = [_tensor(tensors, key, torch.float32) for key in keys]
    for key, t in zip(keys, scalars):
        if tuple(t.shape) not in ((), (1,)):
            raise ValueError(f"nvfp4.load_experts: {key} has shape {tuple(t.shape)}, expected one value ([] or [1])")
    return torch.stack([t.reshape(()) for t in scalars])


def _gate_then_up(stacked: torch.Tensor, count: int) -> torch.Tensor:
    """[2E, ...] (every expert's gate, then every expert's up) -> [E, 2, ...] (each expert's gate, up)."""
    return stacked.unflatten(0, (2, count)).transpose(0, 1)
