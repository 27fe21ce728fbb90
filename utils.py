"""Helpers shared by the reference and the harness: seeding, tolerant comparison, L2 flush."""

import random

import numpy as np
import torch


def set_seed(seed: int = 42) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def get_device() -> torch.device:
    """The device the harness generates data on: the current CUDA GPU, else the CPU."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def mismatch_mask(received: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> torch.Tensor:
    """Elements that fail |r - e| <= atol + rtol * |e|, or whose NaN/+inf/-inf status differs."""
    r = received.to(device=expected.device, dtype=torch.float32)
    e = expected.to(torch.float32)
    bad = (r - e).abs() > atol + rtol * e.abs()
    bad |= torch.isnan(r) ^ torch.isnan(e)
    bad |= torch.isposinf(r) ^ torch.isposinf(e)
    bad |= torch.isneginf(r) ^ torch.isneginf(e)
    return bad


@torch.no_grad()
def verbose_allclose(received: torch.Tensor, expected: torch.Tensor, rtol=1e-05, atol=1e-08, max_print=5) -> list[str]:
    """Empty list when all elements match within tolerance, else a description of the mismatches."""
    if received.shape != expected.shape:
        return [f"SIZE MISMATCH: got {tuple(received.shape)}, expected {tuple(expected.shape)}"]
    bad = mismatch_mask(received, expected, rtol, atol)
    count = int(bad.count_nonzero())
    if count == 0:
        return []
    details = [f"Number of mismatched elements: {count}"]
    for index in torch.nonzero(bad)[:max_print]:
        i = tuple(index.tolist())
        details.append(f"ERROR AT {i}: {received[i].item()} {expected[i].item()}")
    if count > max_print:
        details.append(f"... and {count - max_print} more mismatched elements.")
    return details


@torch.no_grad()
def verbose_allequal(received: torch.Tensor, expected: torch.Tensor, max_print=5) -> list[str]:
    return verbose_allclose(received, expected, rtol=0.0, atol=0.0, max_print=max_print)


def match_reference(data, output, reference, rtol=1e-05, atol=1e-08) -> tuple[bool, str]:
    """Compare every group of `output` with `reference(data)`; the message names each failing group."""
    expected = reference(data)
    if not isinstance(output, (list, tuple)):
        return False, f"output must be a list of tensors, got {type(output).__name__}"
    if len(output) != len(expected):
        return False, f"output length mismatch: got {len(output)}, expected {len(expected)}"
    failures = []
    for i, (out_i, exp_i) in enumerate(zip(output, expected)):
        if not isinstance(out_i, torch.Tensor):
            failures.append(f"group {i}: not a tensor but {type(out_i).__name__}")
            continue
        reasons = verbose_allclose(out_i, exp_i, rtol=rtol, atol=atol)
        if reasons:
            failures.append(f"group {i}: {reasons}")
    if failures:
        return False, "mismatch found! custom implementation doesn't match reference: " + "; ".join(failures)
    return True, ""


def make_match_reference(reference, **kwargs):
    def wrapped(data, output):
        return match_reference(data, output, reference=reference, **kwargs)

    return wrapped


def l2_flush_bytes(device: torch.device) -> int:
    """Four times the device's L2: enough to evict it, small enough to be quick."""
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
    return 4 * l2


def clear_l2_cache(device: torch.device | None = None) -> None:
    """Evict the GPU's L2 by writing a buffer several times its size; a no-op without CUDA."""
    if not torch.cuda.is_available():
        return
    device = device or torch.device("cuda")
    scratch = torch.empty(l2_flush_bytes(device) // 8, dtype=torch.int64, device=device)
    scratch.fill_(42)
    del scratch
