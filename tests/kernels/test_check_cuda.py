"""What make check-cuda (and make timeline's note) read in a ptxas report, without nvcc."""

from tools.check_cuda import ptxas_problems

REPORT = """ptxas info    : Compiling entry function 'clean' for 'sm_90a'
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'spilling' for 'sm_90a'
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls
"""


def test_a_report_names_each_kernel_that_spills_and_every_serialized_wgmma():
    assert ptxas_problems(REPORT) == [
        "spilling: 8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads",
        "ptxas (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls",
    ]
    assert ptxas_problems(REPORT.split("ptxas info    : Compiling entry function 'spilling'")[0]) == []
