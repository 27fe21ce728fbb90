import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

_skips = Counter()  # skip reason -> tests skipped for it


def pytest_runtest_logreport(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        _skips[report.longrepr[2].removeprefix("Skipped: ")] += 1


def pytest_unconfigure(config):
    """The run's last line: the skipped tests counted by reason (say "needs X" in a skip's reason)."""
    if not _skips:
        return
    reasons = ", ".join(
        f"{count} {reason.replace('needs ', 'need ', 1) if count > 1 else reason}" for reason, count in _skips.most_common()
    )
    print(f"{sum(_skips.values())} skipped: {reasons}")
