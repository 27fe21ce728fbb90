"""An MoE layer's NVFP4 experts in the kernels' layout, with the two-level scales of real checkpoints.

    experts = nvfp4.Experts(w13, w13_scale, w13_weight_scale_2, w13_input_scale,
                            w2, w2_scale, w2_weight_scale_2, w2_input_scale)
    experts = nvfp4.load_experts("model.safetensors", "model.layers.3.mlp.experts")   # nvfp4/checkpoint.py

Every global scale is a dequantization scale, as ModelOpt stores it (weight ~ code * block_scale *
weight_scale_2; activation ~ code * block_scale * input_scale); the compressed-tensors loader turns
its reciprocals into these. The block scales are moved into the blocked form once, here. The GEMMs
apply alpha = input_scale * weight_scale_2 per expert in their fp32 epilogue (docs/MOE.md).
"""

import torch

from .layout import described
from .moe import check_tensor
from .ops import quantize
from .quantize import blocked_from_plain, plain_from_blocked

FP4 = (torch.uint8, torch.float4_e2m1fn_x2)


def _check(name: str, t, dtypes, shape) -> None:
    check_tensor(f"nvfp4.Experts: {name}", t, dtypes, shape)


def quantize_weight(w: torch.Tensor, weight_scale_2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A weight [..., N, K] (fp16 or bf16) quantized the two-level way with its dequantization global
    scale (float32: one value, or one per row, [..., N]): (codes uint8 [..., N, K/2], block scales
    E4M3 [..., N, K/16] in plain row-major order, as checkpoints store them)."""
    q, sf = quantize(w.contiguous(), global_scale=weight_scale_2.contiguous())
    return q.view(torch.uint8), plain_from_blocked(sf.view(torch.uint8), w.shape[-2]).view(torch.float8_e4m3fn)


def _positive(name: str, t: torch.Tensor) -> None:
    """Global scales are read here once, at load (never in a call): a scale that is not positive and
    finite would make every output of its expert wrong without a sign."""
    if not bool(torch.isfinite(t).all() & (t > 0).all()):
        raise ValueError(f"nvfp4.Experts: {name} must be positive and finite, got {t.flatten()[:8].tolist()}")


class Experts:
    """E experts of hidden size H and intermediate size F.

    w13 [E, 2F, H/2] FP4 (gate's rows, then up's: two codes a byte, low nibble first), w13_scale
    [E, 2F, H/16] E4M3 in plain row-major order (as checkpoints store them), w13_weight_scale_2
    float32 [E] or [E, 2] (gate's, up's), w13_input_scale float32 [E] or [E, 2]; w2 [E, H, F/2],
    w2_scale [E, H, F/16], w2_weight_scale_2 and w2_input_scale float32 [E]. H and F are multiples
    of 64.

    Where gate and up carry different weight scales, w13's alpha has one value per expert and
    column ([E, 2F]), so each half is scaled by its own, exactly. Where their input scales differ,
    the activations are quantized once with the larger (a choice of scale, exact either way: alpha
    uses the same one)."""

    def __init__(self, w13, w13_scale, w13_weight_scale_2, w13_input_scale, w2, w2_scale, w2_weight_scale_2, w2_input_scale):
        if not isinstance(w13, torch.Tensor) or w13.dim() != 3 or not isinstance(w2, torch.Tensor) or w2.dim() != 3:
            raise ValueError("nvfp4.Experts: w13 must be [E, 2F, H/2] and w2 [E, H, F/2]")
        experts, two_f, half_h = w13.shape
        hidden, inter = 2 * half_h, two_f // 2
        if not experts or two_f % 2 or hidden % 64 or inter % 64 or not hidden or not inter:
            raise ValueError(f"nvfp4.Experts: w13 {tuple(w13.shape)}: need E > 0, 2F even, H and F positive multiples of 64")
        device = w13.device
        _check("w13", w13, FP4, (experts, 2 * inter, hidden // 2))
        _check("w13_scale", w13_scale, (torch.float8_e4m3fn,), (experts, 2 * inter, hidden // 16))
        _check("w2", w2, FP4, (experts, hidden, inter // 2))
        _check("w2_scale", w2_scale, (torch.float8_e4m3fn,), (experts, hidden, inter // 16))
        for name, t in (("w13_weight_scale_2", w13_weight_scale_2), ("w13_input_scale", w13_input_scale)):
            if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or tuple(t.shape) not in ((experts,), (experts, 2)):
                raise ValueError(
                    f"nvfp4.Experts: {name} must be float32 [E] or [E, 2] (gate, up), E = {experts}; got " + described(t, with_dtype=True)
                )
        _check("w2_weight_scale_2", w2_weight_scale_2, (torch.float32,), (experts,))
        _check("w2_input_scale", w2_input_scale, (torch.float32,), (experts,))
        tensors = (w13, w13_scale, w13_weight_scale_2, w13_input_scale, w2, w2_scale, w2_weight_scale_2, w2_input_scale)
        if any(t.device != device for t in tensors):
            raise ValueError(f"nvfp4.Experts: every tensor must be on one device; got {sorted({str(t.device) for t in tensors})}")
        for name, t in (
            ("w13_weight_scale_2", w13_weight_scale_2),
            ("w13_input_scale", w13_input_scale),
            ("w2_weight_scale_2", w2_weight_scale_2),
            ("w2_input_scale", w2_input_scale),
        ):
            _positive(name, t)
        self.num_experts, self.hidden, self.intermediate = experts, hidden, inter
        self.w13 = w13.contiguous().view(torch.uint8)
        self.w13_scale = blocked_from_plain(w13_scale.view(torch.uint8)).view(torch.float8_e4m3fn)  # [E, ceil(2F/128), H/64, 32, 4, 4]
        self.w2 = w2.contiguous().view(torch.uint8)
        self.w2_scale = blocked_from_plain(w2_scale.view(torch.uint8)).view(torch.float8_e4m3fn)
        # The activations' global scales: one per expert (gate's and up's input scales both quantize the same x).
        self.w13_input_scale = (w13_input_scale.amax(1) if w13_input_scale.dim() == 2 else w13_input_scale).contiguous()
        self.w2_input_scale = w2_input_scale.contiguous()
        weight = w13_weight_scale_2
        if weight.dim() == 2 and bool((weight[:, 0] == weight[:, 1]).all()):
            weight = weight[:, 0]
        if weight.dim() == 1:
            self.w13_alpha = (self.w13_input_scale * weight).contiguous()  # [E]
        else:  # gate's columns, then up's, each with its own weight scale
            self.w13_alpha = (
                (self.w13_input_scale[:, None, None] * weight[:, :, None]).expand(experts, 2, inter).reshape(experts, 2 * inter)
            )
        self.w2_alpha = (self.w2_input_scale * w2_weight_scale_2).contiguous()

    @classmethod
    def quantized(
        cls,
        w13: torch.Tensor,
        w2: torch.Tensor,
        w13_input_scale: torch.Tensor,
        w2_input_scale: torch.Tensor,
        gate_up_share_scale: bool = True,
    ) -> "Experts":
        """Experts quantized from fp16 or bf16 weights, w13 [E, 2F, H] (gate's rows, then up's) and w2
        [E, H, F], the two-level way: weight_scale_2 = amax / (6 * 448) per expert (and per
        projection: gate and up share the larger unless gate_up_share_scale is False), then
        quantize_weight with it as the global scale. The input scales (float32 [E]) are the
        activations' calibrated amax / (6 * 448), as a checkpoint holds them."""
        for name, w, shape in (("w13", w13, "[E, 2F, H] (2F even)"), ("w2", w2, "[E, H, F]")):
            if not isinstance(w, torch.Tensor) or w.dim() != 3 or w.dtype not in (torch.float16, torch.bfloat16):
                raise ValueError(f"nvfp4.Experts.quantized: {name} must be fp16 or bf16 {shape}, got {described(w, with_dtype=True)}")
        experts, two_f, _ = w13.shape
        if two_f % 2 or tuple(w2.shape) != (experts, w13.shape[2], two_f // 2):
            raise ValueError(
                f"nvfp4.Experts.quantized: w13 [E, 2F, H] and w2 [E, H, F] must agree, got {tuple(w13.shape)} and {tuple(w2.shape)}"
            )
        max_e4m3_e2m1 = 6.0 * 448.0
        halves = w13.reshape(experts, 2, two_f // 2, -1).abs().amax((2, 3)).float() / max_e4m3_e2m1  # [E, 2]
        w13_scale_2 = halves.amax(1, keepdim=True).expand(experts, 2).contiguous() if gate_up_share_scale else halves
        w2_scale_2 = w2.abs().amax((1, 2)).float() / max_e4m3_e2m1
        q13, s13 = quantize_weight(w13, w13_scale_2.repeat_interleave(two_f // 2, dim=1))
        q2, s2 = quantize_weight(w2, w2_scale_2[:, None].expand(experts, w2.shape[1]))
        return cls(q13, s13, w13_scale_2, w13_input_scale, q2, s2, w2_scale_2, w2_input_scale)

    @property
    def device(self) -> torch.device:
        return self.w13.device

    def to(self, device) -> "Experts":
        """The same experts on another device (a new object; its tensors moved, nothing recomputed)."""
        if isinstance(device, torch.dtype):
            raise ValueError(f"nvfp4.Experts.to takes a device: its codes, scales and alphas keep their dtypes, got {device}")
        moved = object.__new__(Experts)
        moved.__dict__.update({k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.__dict__.items()})
        return moved

    def __repr__(self) -> str:
        per_column = " (gate and up with their own weight scales)" if self.w13_alpha.dim() == 2 else ""
        return f"nvfp4.Experts(E={self.num_experts}, H={self.hidden}, F={self.intermediate}, {self.device}{per_column})"
