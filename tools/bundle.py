"""Write the CUDA sources under csrc/ into submission.py, the one file the leaderboard takes.

    python tools/bundle.py [--check]          (make bundle)

Starting at csrc/nvfp4.cu, every `#include "..."` of a file under csrc/ is replaced by that file's
text, once per file (its `#pragma once` dropped), each piece preceded by a `#line` directive so
that compiler messages name the source file and line. The result replaces the marked region of
submission.py (CUDA_SOURCE); the Python around it is hand-written and left alone. A file included
again later must sit under the same conditionals as its first inclusion (or more), so that its
one copy is compiled wherever it is needed. --check fails when submission.py is not what the
sources produce, or when csrc/sm90/wgmma_generated.cuh is not what tools/gen_wgmma.py writes.
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
SUBMISSION = ROOT / "submission.py"
BEGIN = "# ----- BEGIN BUNDLE: written by tools/bundle.py from csrc/ (edit the sources there, then run `make bundle`)\n"
END = "# ----- END BUNDLE\n"
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"\s*$')
QUOTED_INCLUDE = re.compile(r'\s*#\s*include\s*"')  # any include of a project file, well formed or not
OPENS, BRANCHES, CLOSES = re.compile(r"\s*#\s*if"), re.compile(r"\s*#\s*(elif|else)\b"), re.compile(r"\s*#\s*endif\b")


class BundleError(Exception):
    pass


def bundle(csrc: Path = CSRC) -> str:
    """The translation unit of a csrc/ directory (its nvfp4.cu and what that includes), as one text
    with #line directives naming each file as csrc/<path>."""
    csrc = csrc.resolve()
    placed: dict[Path, tuple] = {}  # file -> the conditionals its one copy sits under
    out: list[str] = []
    branch_ids = iter(range(1 << 30))

    def inline(path: Path, conditions: tuple) -> None:
        name = "csrc/" + path.relative_to(csrc).as_posix()
        placed[path] = conditions
        out.append(f'#line 1 "{name}"')
        stack = list(conditions)
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip() == "#pragma once":
                out.append("")
                continue
            if QUOTED_INCLUDE.match(line) and not INCLUDE.match(line):
                raise BundleError(f"{name}:{number}: write a project include alone on its line: {line.strip()}")
            if match := INCLUDE.match(line):
                target = (path.parent / match[1]).resolve()
                if not target.is_relative_to(csrc) or not target.is_file():
                    raise BundleError(f"{name}:{number}: no file {match[1]} under csrc/")
                if target in placed:
                    earlier = placed[target]
                    if tuple(stack[:len(earlier)]) != earlier:
                        raise BundleError(f"{name}:{number}: {match[1]} was first included under other conditionals; include it "
                                          "first where it is needed in every build")
                    out.append("")
                    continue
                inline(target, tuple(stack))
                out.append(f'#line {number + 1} "{name}"')
                continue
            if OPENS.match(line):
                stack.append(next(branch_ids))
            elif BRANCHES.match(line):
                stack[-1] = next(branch_ids)
            elif CLOSES.match(line):
                stack.pop()
            out.append(line)

    inline(csrc / "nvfp4.cu", ())
    text = "\n".join(out) + "\n"
    if '"""' in text or text.rstrip().endswith("\\"):
        raise BundleError('the sources hold """ or end in a backslash, which the raw string in submission.py cannot carry')
    return text


def region(source: str) -> str:
    return f'{BEGIN}CUDA_SOURCE = r"""\n{source}"""\n{END}'


def bundled_submission(current: str, source: str) -> str:
    start, end = current.find(BEGIN), current.find(END)
    if start < 0 or end < start:
        raise BundleError(f"{SUBMISSION.name} has no region between the bundle's markers")
    return current[:start] + region(source) + current[end + len(END):]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if submission.py is not what the sources produce")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tools"))
    from gen_wgmma import OUT as GENERATED, generated

    try:
        if args.check and GENERATED.read_text() != generated():
            raise BundleError(f"{GENERATED.relative_to(ROOT)} is not what tools/gen_wgmma.py writes: run `make bundle`")
        if not args.check:
            GENERATED.write_text(generated())
        current = SUBMISSION.read_text()
        wanted = bundled_submission(current, bundle())
    except BundleError as e:
        print(f"bundle: {e}", file=sys.stderr)
        return 1
    if args.check:
        if wanted != current:
            print("bundle: submission.py is not what csrc/ produces: run `make bundle`", file=sys.stderr)
            return 1
        print("bundle: submission.py matches csrc/")
        return 0
    SUBMISSION.write_text(wanted)
    print(f"bundle: wrote csrc/ into {SUBMISSION.name} ({len(wanted):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
