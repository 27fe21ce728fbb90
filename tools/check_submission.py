"""Apply the leaderboard server's text rules to a submission file before it is sent.

    python tools/check_submission.py [PATH]        (default: submission.py)

The server (gpu-mode/kernelbot) refuses a file that is empty, over 1,000,000 bytes, not UTF-8,
or that contains the word "stream" in any case anywhere (code, comments, strings). Beside the
submission the leaderboard lays out task.py, utils.py, reference.py and eval.py, its own copies;
a submission should need only the standard library, torch and task (for its types), so any other
import is refused here as well.
Exit 0 when the file passes, 1 with one line per problem otherwise. See docs/PROBLEM.md.
"""
import ast
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
        return found + [f"{path}: not UTF-8 (byte {e.start}: {raw[e.start:e.start + 1]!r})"]
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
                found.append(f"{path}:{node.lineno}: imports {module!r}; the leaderboard provides only the standard library, torch and task")
    return found


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "submission.py")
    if not path.is_file():
        print(f"{path}: no such file", file=sys.stderr)
        return 2
    found = problems(path)
    for line in found:
        print(line, file=sys.stderr)
    size = path.stat().st_size
    print(f"{path}: {'FAILS' if found else 'passes'} the leaderboard's gate ({size:,} bytes"
          f"{f', {len(found)} problem(s)' if found else ''})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
