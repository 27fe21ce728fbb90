"""Send a submission to the nvfp4_group_gemm leaderboard (B200) with the leaderboard's CLI.

    python tools/submit.py [--mode test|benchmark|leaderboard] [PATH]     (make submit MODE=...)

The default mode is test: the leaderboard's B200 test run is the one place where the sm_100a
kernel meets real hardware, so it comes before a ranked run. The file must pass the server's
text rules (tools/check_submission.py) first; a file that fails is not sent. The CLI is
`popcorn` (older releases: `popcorn-cli`, from gpu-mode/popcorn-cli); it needs a registration
(`popcorn register discord` or `github`, which writes ~/.popcorn.yaml). When standard output is
not a terminal, the CLI's --no-tui flag gives plain output.
"""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from check_submission import problems

LEADERBOARD, GPU = "nvfp4_group_gemm", "B200"
MODES = ("test", "benchmark", "leaderboard")
CLI_NAMES = ("popcorn", "popcorn-cli")
INSTALL = ("install the leaderboard's CLI: download it from https://github.com/gpu-mode/popcorn-cli/releases "
           "(or run its install.sh) and put `popcorn` on your PATH")


def find_cli() -> str | None:
    return next((path for path in map(shutil.which, CLI_NAMES) if path), None)


def registered() -> bool:
    """The CLI's registration: ~/.popcorn.yaml with a cli_id line."""
    config = Path.home() / ".popcorn.yaml"
    return config.is_file() and any(line.strip().startswith("cli_id:") and line.split(":", 1)[1].strip()
                                    for line in config.read_text(errors="replace").splitlines())


def command(cli: str, mode: str, path: Path, interactive: bool) -> list[str]:
    return [cli, "submit", "--gpu", GPU, "--leaderboard", LEADERBOARD, "--mode", mode, *([] if interactive else ["--no-tui"]), str(path)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="test", help=f"one of {', '.join(MODES)} (default: test)")
    parser.add_argument("path", nargs="?", default="submission.py")
    args = parser.parse_args()
    if args.mode not in MODES:
        print(f"submit: MODE must be one of {', '.join(MODES)}, not {args.mode!r}", file=sys.stderr)
        return 2
    path = Path(args.path)
    if not path.is_file():
        print(f"submit: no file at {path}", file=sys.stderr)
        return 2
    found = problems(path)
    if found:
        print("\n".join(found), file=sys.stderr)
        print(f"submit: {path} fails the leaderboard's gate ({len(found)} problem(s)); not sent", file=sys.stderr)
        return 1
    cli = find_cli()
    if cli is None:
        print(f"submit: no `popcorn` or `popcorn-cli` on PATH; {INSTALL}", file=sys.stderr)
        return 1
    if not registered():
        name = Path(cli).name
        print(f"submit: {name} is not registered (no cli_id in ~/.popcorn.yaml). Run `{name} register discord` "
              f"(or `{name} register github`) once, then submit again.", file=sys.stderr)
        return 1
    cmd = command(cli, args.mode, path, sys.stdout.isatty())
    print("submit:", " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
