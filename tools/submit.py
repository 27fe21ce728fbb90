"""Send a submission to a GPU MODE leaderboard with the leaderboard's CLI.

    python3 -m tools.submit [--mode test|benchmark|leaderboard] [--leaderboard NAME] [--gpu GPU] [PATH]
    (make submit MODE=... LEADERBOARD=... GPU=...)

The leaderboard this project was made for, nvfp4_group_gemm (B200), closed on 2026-02-21 07:30 (its
deadline in gpu-mode/reference-kernels, problems/nvidia.yaml); its server (gpu-mode/kernelbot,
check_deadline) refuses every mode after a deadline, test included. The tool still sends to any
leaderboard that is open. The file must pass the server's gate first (tools/check_submission.py:
its text rules and KernelGuard); a file that fails is not sent. The CLI is `popcorn` (older
releases: `popcorn-cli`, from gpu-mode/popcorn-cli); it needs a registration (`popcorn register
discord` or `github`, which writes ~/.popcorn.yaml). It runs with --no-tui (plain output), echoed
line by line; a refusal the server explains (a passed deadline, KernelGuard) becomes one line.
"""

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tools.check_submission import check

LEADERBOARD, GPU = "nvfp4_group_gemm", "B200"
CLOSED = {"nvfp4_group_gemm": "2026-02-21 07:30"}  # leaderboards past their deadline, from reference-kernels' problems/*.yaml
MODES = ("test", "benchmark", "leaderboard")
CLI_NAMES = ("popcorn", "popcorn-cli")
INSTALL = (
    "install the leaderboard's CLI: download it from https://github.com/gpu-mode/popcorn-cli/releases "
    "(or run its install.sh) and put `popcorn` on your PATH"
)
REFUSALS = (  # what the server says when it refuses, and the line it becomes
    (
        re.compile(r"deadline to submit to (\S+) has passed", re.IGNORECASE),
        "submit: refused by the server: the leaderboard {0} is past its deadline, and its server refuses every mode after one "
        "(test, benchmark, profile and leaderboard alike); nothing ran",
    ),
    (
        re.compile(r"rejected by KernelGuard pre-check \(([^)]*)\)", re.IGNORECASE),
        "submit: refused by the server: KernelGuard filtered the file ({0}); `make check-submission` shows its verdict",
    ),
)


def find_cli() -> str | None:
    return next((path for path in map(shutil.which, CLI_NAMES) if path), None)


def registered() -> bool:
    """The CLI's registration: ~/.popcorn.yaml with a cli_id line."""
    config = Path.home() / ".popcorn.yaml"
    return config.is_file() and any(
        line.strip().startswith("cli_id:") and line.split(":", 1)[1].strip() for line in config.read_text(errors="replace").splitlines()
    )


def command(cli: str, mode: str, path: Path, leaderboard: str = LEADERBOARD, gpu: str = GPU) -> list[str]:
    return [cli, "submit", "--gpu", gpu, "--leaderboard", leaderboard, "--mode", mode, "--no-tui", str(path)]


def run_cli(cmd: list[str]) -> int:
    """The CLI's output echoed as it comes, until the server's refusal, which becomes one line."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    refusal = None
    for line in proc.stdout:
        refusal = refusal or next((text.format(*m.groups()) for pattern, text in REFUSALS if (m := pattern.search(line))), None)
        if refusal is None:
            print(line, end="", flush=True)
    code = proc.wait()
    if refusal:
        print(refusal, file=sys.stderr)
        return code or 1
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="test", help=f"one of {', '.join(MODES)} (default: test)")
    parser.add_argument("--leaderboard", default=LEADERBOARD, help=f"the leaderboard's name (default: {LEADERBOARD})")
    parser.add_argument("--gpu", default=GPU, help=f"the GPU to run on (default: {GPU})")
    parser.add_argument("path", nargs="?", default="submission.py")
    args = parser.parse_args()
    if args.mode not in MODES:
        print(f"submit: MODE must be one of {', '.join(MODES)}, not {args.mode!r}", file=sys.stderr)
        return 2
    path = Path(args.path)
    if not path.is_file():
        print(f"submit: no file at {path}", file=sys.stderr)
        return 2
    if check(path):
        print(f"submit: {path} fails the leaderboard's gate; not sent", file=sys.stderr)
        return 1
    if args.leaderboard in CLOSED:
        print(
            f"submit: {args.leaderboard} closed on {CLOSED[args.leaderboard]} and its server refuses every mode after its "
            f"deadline; sending all the same, in case it reopened (LEADERBOARD= names another)",
            flush=True,
        )
    cli = find_cli()
    if cli is None:
        print(f"submit: no `popcorn` or `popcorn-cli` on PATH; {INSTALL}", file=sys.stderr)
        return 1
    if not registered():
        name = Path(cli).name
        print(
            f"submit: {name} is not registered (no cli_id in ~/.popcorn.yaml). Run `{name} register discord` "
            f"(or `{name} register github`) once, then submit again.",
            file=sys.stderr,
        )
        return 1
    cmd = command(cli, args.mode, path, args.leaderboard, args.gpu)
    print("submit:", " ".join(cmd), flush=True)
    return run_cli(cmd)


if __name__ == "__main__":
    sys.exit(main())
