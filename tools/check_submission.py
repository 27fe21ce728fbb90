"""Apply the leaderboard server's gate to a submission file before it is sent.

    python3 -m tools.check_submission [PATH ...]    (default: submission.py)

The server (gpu-mode/kernelbot) refuses a file that is empty, over 1,000,000 bytes, not UTF-8,
or that contains the word "stream" in any case anywhere (code, comments, strings). Beside the
submission the leaderboard lays out task.py, utils.py, reference.py and eval.py, its own copies;
a submission should need only the standard library, torch and task (for its types), so any other
import is refused here as well. Where the server enables it, KernelGuard (PyPI `kernelguard`, the
server pins 0.3.1) classifies the file first and the server refuses one it would filter; where the
package is installed, the file is run through its API mode under the default and the strict
profile, each verdict is printed, and a file either profile would filter fails.
Exit 0 when the file passes, 1 with one line per problem otherwise. See docs/PROBLEM.md.
"""

import argparse
import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

MAX_BYTES = 1_000_000
BANNED_WORD = "stream"  # the server tests `"stream" in code.lower()`
ALLOWED_IMPORTS = frozenset(sys.stdlib_module_names) | {"torch", "task"}


def problems(path: Path) -> list[str]:
    """Every rule the file at `path` breaks, one readable line each (empty: it passes)."""
    raw = path.read_bytes()
    if not raw.strip():
        return [f"{path}: the file is empty"]
    found = []
    if len(raw) > MAX_BYTES:
        found.append(f"{path}: {len(raw):,} bytes, the limit is {MAX_BYTES:,}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return found + [f"{path}: not UTF-8 (byte {e.start}: {raw[e.start : e.start + 1]!r})"]
    for number, line in enumerate(text.splitlines(), 1):
        column = line.lower().find(BANNED_WORD)
        while column >= 0:
            found.append(f"{path}:{number}:{column + 1}: contains {BANNED_WORD!r} (in any case), which the server refuses")
            column = line.lower().find(BANNED_WORD, column + 1)
    try:
        tree = ast.parse(raw, filename=str(path))  # bytes: a UTF-8 byte-order mark is taken as Python takes it
    except SyntaxError as e:
        return found + [f"{path}:{e.lineno}: not valid Python: {e.msg}"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = ["." * node.level + (node.module or "")]
        else:
            continue
        for module in modules:
            if module.startswith(".") or module.split(".")[0] not in ALLOWED_IMPORTS:
                found.append(
                    f"{path}:{node.lineno}: imports {module!r}; the leaderboard provides only the standard library, torch and task"
                )
    return found


KERNELGUARD_PROFILES = ("default", "strict")


def kernelguard(path: Path, profile: str) -> dict:
    """KernelGuard's verdict on the file, as the server asks for it: its CLI in API mode, the code on
    standard input, one JSON object out (classification, should_filter, matched_patterns)."""
    proc = subprocess.run(
        [sys.executable, "-m", "kernelguard", "--profile", profile, "--api-mode"], input=path.read_bytes(), capture_output=True, timeout=300
    )
    lines = [line for line in proc.stdout.decode(errors="replace").splitlines() if line.strip()]
    if proc.returncode or not lines:
        raise RuntimeError(f"kernelguard failed (exit {proc.returncode}): {proc.stderr.decode(errors='replace').strip()[-300:]}")
    return json.loads(lines[-1])


def kernelguard_problems(path: Path) -> list[str]:
    """KernelGuard's verdicts printed, one line a profile; a problem for each profile that would filter the file."""
    if importlib.util.find_spec("kernelguard") is None:
        print(f"{path}: KernelGuard is not installed (pip install kernelguard==0.3.1), so its check did not run")
        return []
    found = []
    for profile in KERNELGUARD_PROFILES:
        verdict = kernelguard(path, profile)
        patterns = ", ".join(f"{m['pattern']} ({m['severity']})" for m in verdict["matched_patterns"]) or "none"
        # The server acts on should_filter alone; the classification and patterns are KernelGuard's notes.
        outcome = f"would FILTER it ({verdict['filter_reason']})" if verdict["should_filter"] else "lets it through"
        print(
            f"{path}: KernelGuard's {profile} profile {outcome} (its notes: classified {verdict['classification']}; patterns: {patterns})"
        )
        if verdict["should_filter"]:
            found.append(
                f"{path}: KernelGuard's {profile} profile would filter it ({verdict['filter_reason']}), and the server "
                f"marks a filtered file as hacked"
            )
    return found


def check(path: Path) -> int:
    """The whole gate on the file: the text rules, then KernelGuard; a verdict line on stdout, the
    problems on stderr. 0 when it passes, 1 otherwise."""
    found = problems(path)
    if not found:
        found = kernelguard_problems(path)
    for line in found:
        print(line, file=sys.stderr)
    size = path.stat().st_size
    print(
        f"{path}: {'FAILS' if found else 'passes'} the leaderboard's gate ({size:,} bytes{f', {len(found)} problem(s)' if found else ''})",
        flush=True,
    )
    return 1 if found else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", default=["submission.py"], metavar="PATH", help="the files to check (default: submission.py)")
    paths = [Path(p) for p in parser.parse_args().paths]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"{', '.join(missing)}: no such file", file=sys.stderr)
        return 2
    return max(check(path) for path in paths)  # every file checked and reported, the worst status returned


if __name__ == "__main__":
    sys.exit(main())
