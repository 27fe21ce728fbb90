"""A planted cheat, never a submission: outputs cached by the inputs' data pointers, so that a
repeat on the same tensors returns the first answer without computing. The gate's test
(tests/submission/test_check_submission.py) needs KernelGuard to catch it."""

import torch

from task import input_t, output_t

_outputs = {}


def custom_kernel(data: input_t) -> output_t:
    abc, _, scales, sizes = data
    key = tuple(a.data_ptr() for a, _, _ in abc)
    if key in _outputs:
        return _outputs[key]
    lut = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
    for (a, b, c), (sfa, sfb), (m, n, k, _) in zip(abc, scales, sizes):
        rows = []
        for x, sf, r in ((a, sfa, m), (b, sfb, n)):
            codes = x[..., 0].view(torch.uint8).long()
            values = torch.stack((lut[codes & 15], lut[codes >> 4]), -1).reshape(r, k)
            plain = sf[..., 0].permute(2, 1, 0, 4, 3).reshape(-1, k // 16)[:r].float()
            rows.append(values * plain.repeat_interleave(16, 1))
        c[..., 0] = (rows[0] @ rows[1].T).half()
    _outputs[key] = [c for _, _, c in abc]
    return _outputs[key]
