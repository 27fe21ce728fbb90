import numpy as np
import pytest
import torch
from numpy_reference import e2m1_to_float, e4m3_to_float, group_product

from conftest import requires_cuda
from reference import FP4_VALUES, decode_fp4, generate_full_range_input, generate_input, has_fp4_scaled_mm, ref_kernel, to_blocked

CPU = torch.device("cpu")


def test_fp4_decode_of_all_16_codes():
    expected = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    codes = torch.arange(16, dtype=torch.uint8)
    packed = (codes | (codes.flip(0) << 4)).view(1, 16)  # low nibble first, high nibble second
    decoded = decode_fp4(packed)[0]
    assert decoded[0::2].tolist() == expected
    assert decoded[1::2].tolist() == expected[::-1]
    assert torch.signbit(decoded[16]).item()  # code 8 is -0
    assert list(FP4_VALUES) == expected and e2m1_to_float(np.arange(16)).tolist() == expected


def test_e4m3_decode_matches_torch_for_every_finite_code():
    bits = torch.arange(256, dtype=torch.uint8)
    ours = e4m3_to_float(bits.numpy())
    torch_values = bits.view(torch.float8_e4m3fn).to(torch.float64).numpy()
    np.testing.assert_array_equal(ours, torch_values)  # NaN codes compare equal too


def reordered_memory(reordered: torch.Tensor) -> torch.Tensor:
    """Bytes of a reordered scale tensor in memory order [L][rest_mn][rest_k][32][4][4]."""
    return reordered.permute(5, 2, 4, 0, 1, 3).contiguous().view(torch.uint8).flatten()


@pytest.mark.parametrize("mn,k", [(96, 256), (128, 512), (300, 768), (1, 256)])
def test_reordered_scales_follow_the_atom_formula(mn, k):
    data = generate_full_range_input((mn,), (128,), (k,), 1, seed=mn + k, device=CPU)
    plain = data[1][0][0][:, :, 0].view(torch.uint8)
    reordered = data[2][0][0]
    rest_mn, rest_k = -(-mn // 128), k // 64
    assert reordered.shape == (32, 4, rest_mn, 4, rest_k, 1)
    assert reordered.stride() == (16, 4, rest_k * 512, 1, 512, rest_mn * rest_k * 512)
    memory = reordered_memory(reordered)
    rows, cols = np.meshgrid(np.arange(mn), np.arange(k // 16), indexing="ij")
    offsets = ((rows // 128) * rest_k + cols // 4) * 512 + (rows % 32) * 16 + ((rows % 128) // 32) * 4 + cols % 4
    assert torch.equal(memory[torch.from_numpy(offsets)], plain)


def test_to_blocked_puts_real_scales_where_the_reordered_tensor_has_them():
    data = generate_input((200,), (128,), (512,), 1, seed=3, device=CPU)
    plain, reordered = data[1][0][0][:, :, 0], data[2][0][0]
    blocked = to_blocked(plain).view(torch.uint8)
    memory = reordered_memory(reordered)
    real = torch.zeros(2 * 128, 512 // 16, dtype=torch.bool)
    real[:200] = True
    real_in_blocked = to_blocked(real.view(torch.uint8).view(torch.float8_e4m3fn)).view(torch.uint8).bool()
    assert torch.equal(blocked[real_in_blocked], memory[real_in_blocked])
    assert (blocked[~real_in_blocked] == 0).all()


def test_official_generation_draws_the_documented_values():
    data = generate_input((64, 8), (128, 256), (256, 512), 2, seed=1111, device=CPU)
    for a, b, c in data[0]:
        nibbles = torch.cat([a.view(torch.uint8).flatten() & 0xF, a.view(torch.uint8).flatten() >> 4])
        assert set(nibbles.unique().tolist()) <= {0, 1, 2, 3, 8, 9, 10, 11}
        assert c.dtype == torch.float16 and c.shape[2] == 1
    for sfa, sfb in data[1]:
        assert sfa.device.type == "cpu"
        assert set(sfa.to(torch.float32).unique().tolist()) <= {1.0, 2.0}
    again = generate_input((64, 8), (128, 256), (256, 512), 2, seed=1111, device=CPU)
    assert torch.equal(data[0][1][1].view(torch.uint8), again[0][1][1].view(torch.uint8))


def test_full_range_generation_uses_every_code():
    data = generate_full_range_input((256, 64), (256, 512), (1024, 512), 2, seed=9, device=CPU)
    codes = torch.cat([t.view(torch.uint8).flatten() for abc in data[0] for t in abc[:2]])
    assert torch.unique(codes & 0xF).numel() == 16 and torch.unique(codes >> 4).numel() == 16
    scales = torch.cat([t.view(torch.uint8).flatten() for pair in data[1] for t in pair])
    assert scales.min() >= 1 and scales.max() <= 0x7E  # positive and finite
    assert (scales < 8).any() and (scales > 0x70).any()  # subnormals and the top of the range


@pytest.mark.parametrize("make", [generate_input, generate_full_range_input])
@pytest.mark.parametrize(
    "case",
    [
        ((96, 128), (128, 256), (256, 512)),
        ((40, 1, 3), (512, 128, 384), (256, 768, 512)),
    ],
)
def test_reference_matches_float64_numpy(make, case):
    m, n, k = case
    data = make(m, n, k, len(m), seed=sum(m), device=CPU)
    expected = [group_product(a, b, sfa, sfb) for (a, b, _), (sfa, sfb) in zip(data[0], data[1])]
    for out, exp in zip(ref_kernel(data), expected):
        exp16 = torch.from_numpy(exp).to(torch.float16).to(torch.float32)
        torch.testing.assert_close(out[:, :, 0].to(torch.float32), exp16, rtol=1e-3, atol=1e-3)


def test_reference_handles_an_empty_group():
    data = generate_input((0, 16), (128, 128), (256, 256), 2, seed=1, device=CPU)
    out = ref_kernel(data)
    assert out[0].shape == (0, 128, 1) and out[1].shape == (16, 128, 1)


@requires_cuda
@pytest.mark.skipif(
    not torch.cuda.is_available() or not has_fp4_scaled_mm(torch.device("cuda")), reason="needs an sm_100-class GPU (FP4 _scaled_mm)"
)
def test_scaled_mm_and_decode_paths_agree():
    data = generate_full_range_input((96, 128), (128, 256), (256, 512), 2, seed=5)
    fast = [c.clone() for c in ref_kernel(data, use_scaled_mm=True)]
    exact = ref_kernel(data, use_scaled_mm=False)
    for f, e in zip(fast, exact):
        torch.testing.assert_close(f, e, rtol=1e-3, atol=1e-3)


@requires_cuda
def test_decode_path_on_the_gpu_matches_float64_numpy():
    data = generate_full_range_input((96, 1), (256, 128), (512, 256), 2, seed=11)
    for out, (a, b, _), (sfa, sfb) in zip(ref_kernel(data, use_scaled_mm=False), data[0], data[1]):
        exp = torch.from_numpy(group_product(a, b, sfa, sfb)).to(torch.float16).float()
        torch.testing.assert_close(out[:, :, 0].float().cpu(), exp, rtol=1e-3, atol=1e-3)
