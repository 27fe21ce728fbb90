"""A Mixture-of-Experts layer on NVFP4, with the expert counts kept on the GPU.

    python examples/moe_layer.py            # on a GPU: captured once, replayed with new tokens

Router top-k, permutation of the tokens into the masked layout [E, max_m, H], quantize, the gate/up
GEMM (masked form), SiLU-and-multiply, quantize, the down GEMM, unpermute and combine. Nothing in
forward() reads a GPU value on the host, so a CUDA graph captured once replays with whatever tokens
(and so whatever count per expert) the input holds. check() compares each GEMM with the float64
product of its quantized operands (exact up to fp16 rounding) and the combined output with a float64
combine of the experts' outputs.
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import nvfp4
from nvfp4.self_check import exact_products, first_mismatch


class MoELayer:
    def __init__(self, experts: int, hidden: int, intermediate: int, top_k: int, tokens: int, device, seed: int = 0):
        g = torch.Generator(device="cpu").manual_seed(seed)
        rand = lambda *shape, scale: (torch.randn(*shape, generator=g) * scale).to(device)
        self.experts, self.top_k, self.max_m = experts, top_k, tokens  # an expert gets each token at most once
        self.router = rand(hidden, experts, scale=hidden**-0.5).half()
        self.w13, self.s13 = nvfp4.quantize(rand(experts, 2 * intermediate, hidden, scale=hidden**-0.5).half())  # gate and up
        self.w2, self.s2 = nvfp4.quantize(rand(experts, hidden, intermediate, scale=intermediate**-0.5).half())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict]:
        tokens, hidden = x.shape
        weights, expert = torch.topk(torch.softmax((x @ self.router).float(), -1), self.top_k, -1)
        weights = weights / weights.sum(-1, keepdim=True)
        flat = expert.flatten()
        counts = torch.zeros(self.experts, dtype=torch.int32, device=x.device).scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        order = torch.sort(flat, stable=True).indices
        starts = torch.cumsum(counts, 0) - counts
        sorted_expert = flat[order]
        slot = torch.empty_like(flat)
        slot[order] = sorted_expert * self.max_m + torch.arange(flat.numel(), device=x.device) - starts[sorted_expert]
        permuted = x.new_zeros(self.experts * self.max_m, hidden)
        permuted[slot] = x.repeat_interleave(self.top_k, 0)
        q1, s1 = nvfp4.quantize(permuted.view(self.experts, self.max_m, hidden), counts)
        gate_up = nvfp4.grouped_gemm_masked(q1, s1, self.w13, self.s13, counts)
        gate, up = gate_up.chunk(2, dim=-1)
        q2, s2 = nvfp4.quantize(F.silu(gate) * up, counts)
        down = nvfp4.grouped_gemm_masked(q2, s2, self.w2, self.s2, counts)
        picked = down.view(-1, hidden)[slot].float() * weights.flatten()[:, None]
        out = torch.zeros(tokens, hidden, dtype=torch.float32, device=x.device).index_add_(0, torch.arange(tokens, device=x.device)
                                                                                            .repeat_interleave(self.top_k), picked)
        return out.half(), {"counts": counts, "slot": slot, "weights": weights, "q1": q1, "s1": s1, "gate_up": gate_up, "q2": q2,
                            "s2": s2, "down": down}

    def check(self, x: torch.Tensor, out: torch.Tensor, seen: dict) -> str | None:
        """What is wrong with one forward's results, or None."""
        counts = seen["counts"].tolist()
        expected = torch.zeros(self.experts, dtype=torch.int64, device=x.device)
        expected.scatter_add_(0, torch.topk((x @ self.router).float(), self.top_k, -1).indices.flatten(), torch.ones(x.shape[0] * self.top_k,
                                                                                                                      dtype=torch.int64, device=x.device))
        if counts != expected.tolist():
            return f"counts per expert {counts}, the router gives {expected.tolist()}"
        for name, q, s, w, sw, result in (("gate/up", seen["q1"], seen["s1"], self.w13, self.s13, seen["gate_up"]),
                                          ("down", seen["q2"], seen["s2"], self.w2, self.s2, seen["down"])):
            for e, m in enumerate(counts):
                if not m:
                    continue
                n, k = w.shape[1], 2 * w.shape[2]
                view = lambda blocked, rows: blocked[:-(-rows // 128)].permute(2, 3, 0, 4, 1).unsqueeze(-1)
                exact = exact_products([q[e, :m], w[e], None, view(s[e], m), view(sw[e], n)], [(m, n, k, 1)])
                failure = first_mismatch([result[e, :m].unsqueeze(-1)], exact)
                if failure:
                    return f"{name} GEMM, expert {e}: {failure}"
        picked = seen["down"].view(-1, x.shape[1])[seen["slot"]].double() * seen["weights"].flatten()[:, None].double()
        combined = picked.view(x.shape[0], self.top_k, -1).sum(1)
        if not torch.allclose(out.double(), combined, rtol=2e-3, atol=1e-3):
            return f"combine: largest difference {(out.double() - combined).abs().max().item():.3g}"
        return None


def main() -> int:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    experts, hidden, intermediate, top_k, tokens = (64, 2048, 1024, 4, 256) if device.type == "cuda" else (8, 256, 128, 2, 32)
    layer = MoELayer(experts, hidden, intermediate, top_k, tokens, device)
    x = torch.randn(tokens, hidden, device=device).half()
    out, seen = layer.forward(x)  # eager: builds and loads the kernels
    failure = layer.check(x, out, seen)
    print(f"eager: counts per expert {seen['counts'].tolist()[:16]}...: {failure or 'exact'}")
    if failure:
        return 1
    if device.type != "cuda":
        return 0
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, seen = layer.forward(x)
    for replay in range(3):
        x.copy_(torch.randn(tokens, hidden, device=device) * (1 + replay))  # new tokens: new routing, new counts
        graph.replay()
        torch.cuda.synchronize()
        failure = layer.check(x, out, seen)
        counts = seen["counts"]
        print(f"graph replay {replay}: {int((counts == 0).sum())} empty experts, the busiest {int(counts.max())} rows: {failure or 'exact'}")
        if failure:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
