"""An independent float64 NumPy computation of the problem, straight from the format definitions."""
import numpy as np
import torch


def e2m1_to_float(codes: np.ndarray) -> np.ndarray:
    codes = codes.astype(np.int64)
    sign = np.where(codes & 8, -1.0, 1.0)
    exponent, mantissa = (codes >> 1) & 3, codes & 1
    magnitude = np.where(exponent == 0, mantissa * 0.5, 2.0 ** (exponent - 1) * (1 + mantissa / 2))
    return sign * magnitude


def e4m3_to_float(bits: np.ndarray) -> np.ndarray:
    bits = bits.astype(np.int64)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exponent, mantissa = (bits >> 3) & 0xF, bits & 7
    value = np.where(exponent == 0, mantissa / 8 * 2.0**-6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    return np.where((bits & 0x7F) == 0x7F, np.nan, sign * value)


def group_product(a: torch.Tensor, b: torch.Tensor, sfa: torch.Tensor, sfb: torch.Tensor) -> np.ndarray:
    """float64 [M, N] of one group from its packed [MN, K/2, 1] operands and plain [MN, K/16, 1] scales."""

    def operand(packed, sf):
        codes = packed[:, :, 0].view(torch.uint8).cpu().numpy()
        values = np.stack((e2m1_to_float(codes & 0xF), e2m1_to_float(codes >> 4)), axis=-1).reshape(codes.shape[0], -1)
        scales = e4m3_to_float(sf[:, :, 0].view(torch.uint8).cpu().numpy())
        return values * np.repeat(scales, 16, axis=1)

    return operand(a, sfa) @ operand(b, sfb).T
