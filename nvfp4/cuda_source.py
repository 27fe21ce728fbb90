"""The CUDA translation unit: csrc/nvfp4.cu with every project header it includes written in.

tools/bundle.py writes the text this module makes, for the leaderboard's queue, into submission.py,
where a constant takes this module's place.
"""

import re
from functools import lru_cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent
CSRC = _HERE / "csrc" if (_HERE / "csrc").is_dir() else _HERE.parent / "csrc"  # an installed wheel's copy, or the source tree's
LEADERBOARD_SWAPS = {"host/queue.cuh": "host/queue_default.cuh"}  # the default queue only (docs/PROBLEM.md, the gate)
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"\s*$')
QUOTED_INCLUDE = re.compile(r'\s*#\s*include\s*"')  # any include of a project file, well formed or not
OPENS, BRANCHES, CLOSES = re.compile(r"\s*#\s*if"), re.compile(r"\s*#\s*(elif|else)\b"), re.compile(r"\s*#\s*endif\b")


class SourceError(Exception):
    pass


def translation_unit(csrc: Path = CSRC, swaps: dict[str, str] | None = None) -> str:
    """csrc/nvfp4.cu and what it includes, as one text with #line directives naming each file as
    csrc/<path>; swaps: files (by their path under csrc/) written in place of others.

    Every `#include "..."` of a file under csrc/ is replaced by that file's text, once per file (its
    `#pragma once` dropped). A file included again later must sit under the same conditionals as
    its first inclusion (or more), so that its one copy is compiled wherever it is needed. A
    conditional is known by its text and the chain of #if and #elif before it: `#if NVFP4_ARCH == 90`
    in two files is one condition (the project's conditions test macros given on the command line,
    which keep one value through the translation unit)."""
    csrc = csrc.resolve()
    swapped = {(csrc / old).resolve(): (csrc / new).resolve() for old, new in (swaps or {}).items()}
    placed: dict[Path, tuple] = {}  # file -> the conditionals its one copy sits under
    out: list[str] = []

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
                raise SourceError(f"{name}:{number}: write a project include alone on its line: {line.strip()}")
            if match := INCLUDE.match(line):
                target = (path.parent / match[1]).resolve()
                target = swapped.get(target, target)
                if not target.is_relative_to(csrc) or not target.is_file():
                    raise SourceError(f"{name}:{number}: no file {match[1]} under csrc/")
                if target in placed:
                    earlier = placed[target]
                    if tuple(stack[: len(earlier)]) != earlier:
                        raise SourceError(
                            f"{name}:{number}: {match[1]} was first included under other conditionals; include it "
                            "first where it is needed in every build"
                        )
                    out.append("")
                    continue
                inline(target, tuple(stack))
                out.append(f'#line {number + 1} "{name}"')
                continue
            if OPENS.match(line):
                stack.append((" ".join(line.split()),))
            elif BRANCHES.match(line):
                stack[-1] = (*stack[-1], " ".join(line.split()))
            elif CLOSES.match(line):
                stack.pop()
            out.append(line)

    inline(csrc / "nvfp4.cu", ())
    return "\n".join(out) + "\n"


@lru_cache(maxsize=1)
def cuda_source() -> str:
    """The library's translation unit (built with -DNVFP4_ARCH=90 or 100): its launches go to the
    queue they are given."""
    return translation_unit()
