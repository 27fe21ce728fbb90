"""Types of the NVFP4 block-scaled grouped GEMM problem (docs/PROBLEM.md section 2)."""

from typing import TypedDict, TypeVar

import torch

# (abc_tensors, sfasfb_tensors, sfasfb_reordered_tensors, problem_sizes)
input_t = TypeVar(
    "input_t",
    bound=tuple[
        list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
        list[tuple[torch.Tensor, torch.Tensor]],
        list[tuple[torch.Tensor, torch.Tensor]],
        list[tuple[int, int, int, int]],
    ],
)
output_t = TypeVar("output_t", bound=list[torch.Tensor])


class TestSpec(TypedDict):
    m: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]
    g: int
    seed: int
