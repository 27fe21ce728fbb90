"""The kernels of several revisions of csrc/, timed in one process on the cases of `make regimes`
(`make kernels-ab`, a CUDA GPU with nvcc).

    python3 -m bench.kernels_ab main=HEAD~1 new=. [--regimes "few rows,benchmark"] [--rounds 2]

Each NAME=WHAT is a git revision whose csrc/ is built with nvcc (tools/nvcc_build.py; `.` is the
working tree), or the path of a library built that way. Every library is bound through this
tree's Python side (nvfp4.kernel_path.KernelPath), so the revisions must share its C interface.
Every case is first checked against the reference on a fresh input (outputs poisoned with NaN; not
the many-rows case, whose reference is slow), then each library is timed in turn, as
bench/peers.py times a contender (GPU time behind the leaderboard's flush, 15 input sets), for
`rounds` rounds. Prints a line per case as it goes, then each regime's geometric mean of the best
round (with --floors, also over bench/regimes.py's floors, from rates measured first): two kernels
compared in one run, on one machine, on the same inputs.
"""

import argparse
import ctypes
import sys
from pathlib import Path

import torch

from bench.regimes import add_regimes_option, chosen_regimes, floor_us, regime_cases

ROOT = Path(__file__).resolve().parent.parent


def library_of(what: str) -> Path:
    """The library for NAME=WHAT: WHAT itself if it is a file, else the build of revision WHAT's csrc/."""
    if Path(what).is_file():
        return Path(what)
    from tools.nvcc_build import build, revision_sources

    return build(90, tree=revision_sources(what))[0]


def regime_summary(times: list, floors: list[float] | None) -> str:
    """A library's geometric mean over a regime's cases (us), and over their floors when given; n/a
    when a case has no time."""
    from harness.floors import geomean

    if not all(isinstance(t, float) for t in times):
        return "n/a"
    return f"{geomean(times):.2f}" + (f" ({geomean([t / f for t, f in zip(times, floors)]):.3f}x the floor)" if floors else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="+", metavar="NAME=WHAT", help="a git revision (. for the working tree) or a library")
    add_regimes_option(parser)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0, help="time limit per library, case and round")
    parser.add_argument(
        "--floors",
        action="store_true",
        help="also each regime's geomean over its floors (bench/regimes.py's, from a copy and a matmul measured first)",
    )
    args = parser.parse_args()
    pairs = [k.split("=", 1) for k in args.kernels]
    if any(len(p) != 2 for p in pairs) or len({name for name, _ in pairs}) != len(pairs):
        parser.error("each kernel is NAME=WHAT, each NAME once")
    regimes = chosen_regimes(parser, args.regimes)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        sys.exit("bench/kernels_ab.py builds and times the sm_90a kernels: it needs an sm_90 GPU")

    import nvfp4
    from bench.peers import STALL_NOTE, clone_data, contender_stats, mean_us, measure_ceilings, stalled
    from nvfp4 import dispatch
    from nvfp4.boundary import bind
    from nvfp4.kernel_path import KernelPath
    from reference import check_implementation, generate_input

    device = torch.device("cuda", torch.cuda.current_device())
    rates = measure_ceilings() if args.floors else None
    if rates:
        print(f"copy {rates[0] / 1e9:.0f} GB/s, bf16 matmul {rates[1] / 1e12:.0f} TFLOP/s (the floors' rates)", flush=True)
    paths = {}
    for name, what in pairs:
        lib = library_of(what)
        print(f"{name}: {what} -> {lib.name}", flush=True)
        paths[name] = KernelPath(bind(ctypes.CDLL(str(lib))), device)
    fmt = lambda t: f"{t:.2f}" if isinstance(t, float) else t  # noqa: E731 (a time, or why there is none)
    times, marks = {}, {}  # per (case, library): each round's mean (us), and "!" where a repeat stalled
    cases = [c for c in regime_cases() if c[0] in regimes]
    for regime, label, case in cases:
        for name, path in paths.items():
            if regime == "many rows":
                continue
            data = generate_input(**{**case, "seed": case["seed"] + 7})
            for _, _, c in data[0]:
                c.fill_(float("nan"))
            with dispatch.use_path(device, path):
                ok, message = check_implementation(data, nvfp4.custom_kernel(clone_data(data)))
            if not ok:
                sys.exit(f"{name} is wrong on {label}: {message[:400]}")
        for _ in range(args.rounds):
            for name, path in paths.items():
                with dispatch.use_path(device, path):
                    stats = contender_stats(nvfp4.custom_kernel, lambda d: d, case, 15, args.seconds * 1e9)
                times.setdefault((label, name), []).append(mean_us(stats))
                marks.setdefault((label, name), []).append("!" if stalled(stats) else "")
        print(
            f"{label:40}"
            + "".join(f"  {name} " + " / ".join(fmt(t) + m for t, m in zip(times[(label, name)], marks[(label, name)])) for name in paths),
            flush=True,
        )
    for regime in regimes:
        chosen = [(label, case) for r, label, case in cases if r == regime]
        floors = [floor_us(regime, case, *rates) for _, case in chosen] if rates else None
        best = {
            name: [min(times[(label, name)], key=lambda t: t if isinstance(t, float) else float("inf")) for label, _ in chosen]
            for name in paths
        }
        print(f"{regime}: geomean of the best round, us: " + "  ".join(f"{name} {regime_summary(b, floors)}" for name, b in best.items()))
    if any("!" in m for m in marks.values()):
        print(STALL_NOTE)


if __name__ == "__main__":
    main()
