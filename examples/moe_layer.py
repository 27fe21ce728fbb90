"""A Mixture-of-Experts layer on NVFP4 experts, from a checkpoint on disk to CUDA graph replays.

    python3 -m examples.moe_layer [--format modelopt|compressed-tensors] [--tokens 64] [--save model.safetensors]

1. A small MoE layer in bf16 (a router, E experts of gate, up and down projections) is quantized the
   two-level way, as ModelOpt exports it (per projection weight_scale_2 = amax / 2688, block scales
   relative to it; input_scale from the activations' amax), and written as a .safetensors checkpoint
   in ModelOpt's naming or compressed-tensors' (whose global scales are the reciprocals); --save keeps
   it (prefix model.layers.0.mlp.experts) for the README's example.
2. nvfp4.load_experts reads it back; the layer (router softmax, top-k, nvfp4.fused_moe) runs eagerly
   and is compared with the same layer in bf16 without quantization.
3. On a GPU, the layer is captured in a CUDA graph once and replayed with new tokens, each replay
   checked against an eager call on the same tokens.
"""

import argparse
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

import nvfp4
from nvfp4.experts import quantize_weight


def write_checkpoint(path: Path, prefix: str, w13: torch.Tensor, w2: torch.Tensor, in13: float, in2: float, fmt: str) -> None:
    """The experts' projections quantized one by one into a safetensors file."""
    from safetensors.torch import save_file

    inter = w13.shape[1] // 2
    tensors = {}
    for e in range(w13.shape[0]):
        for proj, weight, input_scale in (
            ("gate_proj", w13[e, :inter], in13),
            ("up_proj", w13[e, inter:], in13),
            ("down_proj", w2[e], in2),
        ):
            scale_2 = weight.abs().amax().float().reshape(1) / 2688.0  # ModelOpt's weight_scale_2: amax / (6 * 448)
            codes, scales = quantize_weight(weight, scale_2)
            name = f"{prefix}.{e}.{proj}"
            input_scale = torch.tensor(input_scale, dtype=torch.float32)
            if fmt == "modelopt":
                tensors.update(
                    {
                        f"{name}.weight": codes,
                        f"{name}.weight_scale": scales,
                        f"{name}.weight_scale_2": scale_2.reshape(()),
                        f"{name}.input_scale": input_scale,
                    }
                )
            else:  # compressed-tensors: quantization scales, the reciprocals
                tensors.update(
                    {
                        f"{name}.weight_packed": codes,
                        f"{name}.weight_scale": scales,
                        f"{name}.weight_global_scale": (1.0 / scale_2).reshape(()),
                        f"{name}.input_global_scale": 1.0 / input_scale,
                    }
                )
    save_file({k: v.cpu().contiguous() for k, v in tensors.items()}, str(path))


class MoELayer:
    def __init__(self, router: torch.Tensor, experts: nvfp4.Experts, top_k: int):
        self.router, self.experts, self.top_k = router, experts, top_k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, ids = torch.topk(torch.softmax((x @ self.router).float(), -1), self.top_k, -1)
        return nvfp4.fused_moe(x, weights / weights.sum(-1, keepdim=True), ids, self.experts)


def intermediate(x: torch.Tensor, w13: torch.Tensor) -> torch.Tensor:
    """SiLU(gate) * up of one expert, in float32 from bf16."""
    gate, up = (x.float() @ w13.float().T).chunk(2, dim=-1)
    return F.silu(gate) * up


def bf16_layer(x, router, w13, w2, top_k) -> torch.Tensor:
    """The same layer without quantization (float32 from the bf16 weights)."""
    weights, ids = torch.topk(torch.softmax((x @ router).float(), -1), top_k, -1)
    weights = weights / weights.sum(-1, keepdim=True)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in range(w13.shape[0]):
        token, j = (ids == e).nonzero(as_tuple=True)
        if len(token):
            out.index_add_(0, token, weights[token, j, None] * (intermediate(x[token], w13[e]) @ w2[e].float().T))
    return out


def relative(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got.float() - expected.float()).norm() / expected.float().norm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", choices=("modelopt", "compressed-tensors"), default="modelopt")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--save", type=Path, help="write the checkpoint here and keep it (default: a temporary file)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    experts, hidden, inter, top_k = (32, 2048, 1024, 8) if device.type == "cuda" else (8, 512, 256, 2)
    g = torch.Generator().manual_seed(0)
    router = (torch.randn(hidden, experts, generator=g) * hidden**-0.5).to(torch.bfloat16).to(device)
    w13 = (torch.randn(experts, 2 * inter, hidden, generator=g) * 0.02).to(torch.bfloat16).to(device)
    w2 = (torch.randn(experts, hidden, inter, generator=g) * 0.02).to(torch.bfloat16).to(device)
    tokens = lambda: (
        (torch.randn(args.tokens, hidden, generator=g) * (1 + 9 * torch.rand(args.tokens, 1, generator=g))).to(torch.bfloat16).to(device)
    )
    x = tokens()
    # Input scales calibrated on these tokens' amax (before w13, and between the GEMMs: SiLU(gate) * up
    # under every expert), with room for the tokens to come.
    in13 = float(x.abs().max()) / 2688.0 * 1.5
    in2 = max(float(intermediate(x, w13[e]).abs().max()) for e in range(experts)) / 2688.0 * 1.5

    with tempfile.TemporaryDirectory() as folder:
        path = args.save or Path(folder) / "model.safetensors"
        prefix = "model.layers.0.mlp.experts"
        write_checkpoint(path, prefix, w13, w2, in13, in2, args.format)
        print(f"wrote {experts} experts (H {hidden}, F {inter}) in the {args.format} format: {path.stat().st_size / 2**20:.1f} MiB")
        loaded = nvfp4.load_experts(path, prefix, device=device)
    print(f"loaded {loaded}; nvfp4 path: {nvfp4.prepare(device)}")
    layer = MoELayer(router, loaded, top_k)
    y = layer.forward(x)
    print(
        f"eager, {args.tokens} tokens, top-{top_k}: finite {bool(torch.isfinite(y).all())}, relative error against the "
        f"unquantized bf16 layer {relative(y, bf16_layer(x, router, w13, w2, top_k)):.3f}"
    )
    if device.type != "cuda":
        print("(no GPU: the CUDA graph part runs on a GPU only)")
        return
    static_x = x.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = layer.forward(static_x)
    for replay in range(3):
        static_x.copy_(tokens())
        graph.replay()
        same = torch.equal(static_y, layer.forward(static_x))
        print(
            f"graph replay {replay} on new tokens: equal to an eager call {same}, relative error against bf16 "
            f"{relative(static_y, bf16_layer(static_x, router, w13, w2, top_k)):.3f}"
        )
        if not same:
            sys.exit("a graph replay differs from the eager call")


if __name__ == "__main__":
    main()
