"""Build the CUDA sources under csrc/ into a shared library with plain nvcc (no torch, no GPU needed).

The library's host functions (tile schedule, scale offsets, plan inspection) can be called
through ctypes on any machine; its kernels need their GPU. It is built from csrc/ itself (the
library's form, launching on the queue it is given), so compiler messages name the source files;
LEADERBOARD_OVERRIDES build submission.py's form (the default queue only), whose text
tools/bundle.py --check keeps in submission.py. Builds are cached in build/ by a hash of the
sources and flags.
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from nvfp4.boundary import bind
from nvfp4.build import BUILD_TARGETS, nvcc_flags
from nvfp4.cuda_source import LEADERBOARD_SWAPS
from tools.cuda_toolkits import Toolkit

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
CSRC = ROOT / "csrc"

MACHINE_TOOLKIT = Toolkit("", "nvcc", None)  # the nvcc on PATH, with its own headers


def sources(overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The text of every file under csrc/ by its path there, with `overrides` replacing some."""
    found = {p.relative_to(CSRC).as_posix(): p.read_text() for p in sorted(CSRC.rglob("*")) if p.is_file()}
    unknown = set(overrides or ()) - set(found)
    if unknown:
        raise ValueError(f"no such files under csrc/: {sorted(unknown)}")
    return {**found, **(overrides or {})}


LEADERBOARD_OVERRIDES = {old: (CSRC / new).read_text() for old, new in LEADERBOARD_SWAPS.items()}  # submission.py's form


def replacing(*edits: tuple[str, str]) -> dict[str, str]:
    """Overrides that replace, for each (old, new) of `edits` in turn, the one occurrence of `old` in
    csrc/ by `new` (for deliberately broken builds)."""
    texts = sources()
    changed = {}
    for old, new in edits:
        holders = [name for name, text in texts.items() if old in text]
        if len(holders) != 1 or texts[holders[0]].count(old) != 1:
            raise ValueError(f"{old!r} occurs {sum(t.count(old) for t in texts.values())} times in csrc/, not once")
        texts[holders[0]] = changed[holders[0]] = texts[holders[0]].replace(old, new)
    return changed


def revision_sources(revision: str) -> dict[str, str] | None:
    """The text of every file of csrc/ at a git revision, by its path there (None: the working tree),
    whatever files the working tree's csrc/ has."""
    if revision == ".":
        return None

    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{revision}: not a revision of this repository's git history ({proc.stderr.strip()[:200]})")
        return proc.stdout

    names = [n.removeprefix("csrc/") for n in git("ls-tree", "-r", "--name-only", revision, "csrc").split()]
    if not names:
        raise SystemExit(f"{revision} has no csrc/")
    return {name: git("show", f"{revision}:csrc/{name}") for name in names}


def source_tree(overrides: dict[str, str] | None, tree: dict[str, str] | None = None) -> tuple[Path, str]:
    """(a csrc/ directory to compile, the digest of its text): csrc/ itself, a copy with the overrides,
    or a directory of exactly the files of `tree`."""
    if tree is not None and overrides:
        raise ValueError("a build takes overrides of csrc/ or a whole tree, not both")
    texts = dict(sorted(tree.items())) if tree is not None else sources(overrides)
    digest = hashlib.sha1("".join(f"{name}\0{text}\0" for name, text in texts.items()).encode()).hexdigest()[:12]
    if tree is None and not overrides:
        return CSRC, digest
    directory = BUILD / f"csrc_{digest}"
    if not directory.exists():
        staging = BUILD / f"csrc_{digest}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        for name, text in texts.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_text(text)
        staging.rename(directory)
    return directory, digest


def build(
    arch: int,
    target: str | None = None,
    emulate_tcgen05: bool = False,
    overrides: dict[str, str] | None = None,
    toolkit: Toolkit | None = None,
    device_code: bool = True,
    defines: tuple[str, ...] = (),
    tree: dict[str, str] | None = None,
) -> tuple[Path, str]:
    """(path of the shared library, or of the object file without device_code; ptxas report) for
    NVFP4_ARCH=arch on nvcc target `target`.

    emulate_tcgen05: the sm_100a kernel with tcgen05 emulated, built for sm_90a. overrides: files of
    csrc/ replaced (the tests build deliberately broken variants; see replacing()). toolkit: a CUDA
    toolkit other than the machine's (tools/cuda_toolkits.py). device_code=False: an object file
    with PTX only (no ptxas), enough to check the host code against the toolkit's API. defines:
    macros set on the command line (NAME=VALUE), e.g. NVFP4_TIMELINE=1 for bench/timeline.py. tree:
    every file of the csrc/ to build instead of this one (a git revision's: bench/kernels_ab.py).
    """
    toolkit = toolkit or MACHINE_TOOLKIT
    target = target or ("90a" if emulate_tcgen05 else BUILD_TARGETS[arch])
    source_dir, source_digest = source_tree(overrides, tree)
    flags = [*toolkit.flags, *nvcc_flags(arch, target, emulate_tcgen05), *(f"-D{d}" for d in defines)]
    if not device_code:
        flags = [f.replace(f"code=sm_{target}", f"code=compute_{target}") for f in flags]
    digest = hashlib.sha1((source_digest + " ".join(flags) + toolkit.nvcc).encode()).hexdigest()[:12]
    BUILD.mkdir(exist_ok=True)
    flavour = f"sm{target}" + ("_tcgen05_emulated" if emulate_tcgen05 else "") + (f"_cuda{toolkit.version}" if toolkit.version else "")
    out = BUILD / (f"libnvfp4_{flavour}_{digest}.so" if device_code else f"nvfp4_{flavour}_{digest}.o")
    log_path = BUILD / f"ptxas_{flavour}_{digest}.log"
    if not out.exists() or not log_path.exists():
        link = ["-shared", "-Xcompiler", "-fPIC"] if device_code else ["-c"]
        log_path.write_text(_nvcc(toolkit.nvcc, [*link, "-Xptxas", "-v", *flags, str(source_dir / "nvfp4.cu")], out, f"sm_{target}"))
    return out, log_path.read_text()


def included_headers(arch: int, toolkit: Toolkit) -> list[str]:
    """The headers nvcc reads for csrc/nvfp4.cu with this toolkit (its -M list)."""
    flags = [*toolkit.flags, *nvcc_flags(arch, BUILD_TARGETS[arch])]
    proc = subprocess.run([toolkit.nvcc, "-M", *flags, str(CSRC / "nvfp4.cu")], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"nvcc -M failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc.stdout.replace("\\\n", " ").split()


def include_flags(nvcc: str = "nvcc") -> list[str]:
    """The -I flags nvcc gives its host compiler (the CUDA headers), for compiling host code with a
    host compiler alone."""
    proc = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull], capture_output=True, text=True)
    line = next((line for line in (proc.stdout + proc.stderr).splitlines() if "INCLUDES=" in line), "")
    return [flag for flag in line.split('"')[1].split() if flag.startswith("-I")] if '"' in line else []


def _nvcc(nvcc: str, args: list[str], out: Path, what: str) -> str:
    """Run nvcc with `-o out`; its output (the ptxas report with -Xptxas -v)."""
    proc = subprocess.run([nvcc, *args, "-o", str(out)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"nvcc failed for {what}:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc.stdout + proc.stderr


def load(arch: int, target: str | None = None, emulate_tcgen05: bool = False, overrides: dict[str, str] | None = None) -> ctypes.CDLL:
    return bind(ctypes.CDLL(str(build(arch, target, emulate_tcgen05, overrides)[0])))


def build_probes(probe_source: Path) -> ctypes.CDLL:
    """The library of test kernels `probe_source` (see probe_library), loaded."""
    return ctypes.CDLL(str(probe_library(probe_source)))


def probe_library(probe_source: Path) -> Path:
    """A library of test kernels (`probe_source`, which includes the csrc/ headers it needs), built
    as the tcgen05 emulation build (NVFP4_ARCH=100 for sm_90a)."""
    _, source_digest = source_tree(None)
    flags = nvcc_flags(100, "90a", emulate_tcgen05=True)
    digest = hashlib.sha1((source_digest + probe_source.read_text() + " ".join(flags)).encode()).hexdigest()[:12]
    BUILD.mkdir(exist_ok=True)
    lib = BUILD / f"lib{probe_source.stem}_{digest}.so"
    if not lib.exists():
        _nvcc("nvcc", ["-shared", "-Xcompiler", "-fPIC", *flags, f"-I{CSRC}", str(probe_source)], lib, probe_source.name)
    return lib
