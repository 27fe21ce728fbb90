"""Clear errors for input the package cannot take, before anything is launched."""

import torch

from .layout import TENSOR_ROLES, described, described_placement, group_shapes


def _fail(group: int, what: str):
    raise ValueError(f"nvfp4 grouped gemm, group {group}: {what}")


def validate(tensors: list, sizes, operand_rank: int, alpha=None) -> None:
    """Raise ValueError naming the group and the problem for any input the package cannot take
    (tensors, sizes and alpha as layout.py describes them). Runs on every call that is not a cache
    hit, so the common case does no string work: a message is only formatted for a check that failed."""
    groups = len(sizes)
    if not groups or len(tensors) != 5 * groups:
        raise ValueError(f"nvfp4 grouped gemm: need 5 tensors (a, b, c, sfa, sfb) for each of the {groups} groups, got {len(tensors)}")
    first = tensors[0]
    if not isinstance(first, torch.Tensor):
        _fail(0, f"a is not a tensor but {type(first).__name__}")
    device = first.get_device()  # an index (-1: the CPU): cheaper to compare than torch.device
    for g, size in enumerate(sizes):
        if len(size) != 4:
            _fail(g, f"problem size must be (M, N, K, L), got {size}")
        m, n, k, l = size
        if l != 1:
            _fail(g, f"L must be 1, got {l}")
        if not (k > 0 and k % 64 == 0):
            _fail(g, f"K must be a positive multiple of 64, got {k}")
        roles = zip(
            TENSOR_ROLES,
            (tensors[3 * g], tensors[3 * g + 1], tensors[3 * g + 2], tensors[3 * groups + 2 * g], tensors[3 * groups + 2 * g + 1]),
            group_shapes(m, n, k, operand_rank),
        )
        for (name, dtypes), t, shape in roles:
            if not isinstance(t, torch.Tensor):
                _fail(g, f"{name} is not a tensor but {type(t).__name__}")
            if t.dtype not in dtypes:
                _fail(g, f"{name} has dtype {t.dtype}, expected {' or '.join(map(str, dtypes))}")
            if t.shape != shape:
                _fail(g, f"{name} has shape {tuple(t.shape)}, expected {shape}")
            if t.get_device() != device:
                _fail(g, f"{name} is on {t.device}, group 0's a on {first.device}")
    out_dtypes = {tensors[3 * g + 2].dtype for g in range(groups)}
    if len(out_dtypes) > 1:
        raise ValueError(f"nvfp4 grouped gemm: every group's c must have one dtype, got {sorted(map(str, out_dtypes))}")
    if alpha is not None:
        if not isinstance(alpha, torch.Tensor) or alpha.dtype != torch.float32 or tuple(alpha.shape) != (groups,):
            raise ValueError(
                f"nvfp4 grouped gemm: alpha must be a float32 tensor [groups] = [{groups}], got " + described(alpha, with_dtype=True)
            )
        if alpha.get_device() != device or not alpha.is_contiguous():
            raise ValueError(
                f"nvfp4 grouped gemm: alpha must be contiguous and on {first.device} with the operands, got " + described_placement(alpha)
            )
