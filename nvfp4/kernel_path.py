"""A compiled CUDA path: launch plans cached per call, their CUDA graphs, and the per-call hot path.

Every launch goes to the caller's current queue (launch_queue.py). Outside a graph capture, a call's
signature (the queue, every data pointer and tensor object, alpha's, the sizes) keys a launch plan:
the first call validates the input, makes the plan and launches it plainly; the second builds the
plan's CUDA graph; every later call with the same (still alive) tensors replays it. Inside a capture the plan
is made for that call alone and launched into the caller's graph, with its workspace from the
capture's own memory, so that each replay computes from the values the tensors hold then.
"""

import ctypes
import os
import threading
import warnings
import weakref
from functools import lru_cache, reduce
from itertools import compress, repeat
from operator import attrgetter, or_

import torch

from .boundary import GroupDesc
from .build import EMULATION_SEED_ENV
from .launch_queue import capturing, current_queue
from .layout import E4M3_DTYPES, FP4_DTYPES, OUT_DTYPES, group_shapes, group_tensors, packed_scale_strides
from .portable import portable_kernel
from .validate import validate

# The tile shapes (nvfp4_plan_create's tiles): the one the schedule chooses by its cost, or one of
# the kernel's. sm_100a: 128 rows of A by 128 of B, swapped (128 rows of B by 256 of A), or swapped
# over a CTA pair (256 rows of B by 128 of A). sm_90a: 128 rows of B by up to 256 of A, or 256 rows
# of B by up to 64 of A in a deeper pipeline (few rows).
TILES_CHOSEN, TILES_UNSWAPPED, TILES_SWAPPED, TILES_PAIR = -1, 0, 1, 2
TILES_FEW_ROWS = 1
TILE_SHAPE_NAMES = {
    100: {TILES_CHOSEN: "chosen", TILES_UNSWAPPED: "unswapped", TILES_SWAPPED: "swapped", TILES_PAIR: "pair"},
    90: {TILES_CHOSEN: "chosen", 0: "up to 256 rows", TILES_FEW_ROWS: "few rows"},
}
KERNEL_MAX_M, KERNEL_MAX_N = 512 * 128, 65536 * 128  # the tile fields: 512 row blocks of 128, 65536 column blocks of 128

_data_ptr = torch.Tensor.data_ptr  # unbound: one attribute lookup for all the tensors of a call
_current_device = torch.cuda.current_device


class _Plan:
    """A launch plan made in C++, the workspace it uses, its CUDA graph once built, and whether it
    still vouches for its tensors.

    The cache key holds the ids of the tensor objects the plan was validated for; the plan vouches
    for them while every one is alive. Once one dies, another object may reuse its id (and its
    address): the next call with that key is validated again before anything runs, and a plan
    nobody revives is released at the next miss.
    """

    __slots__ = ("key", "handle", "workspace", "graph", "alive", "last_used", "_refs", "_dead", "__weakref__")

    def __init__(self, key, handle: int, workspace: torch.Tensor | None, dead: list):
        self.key = key
        self.handle = handle
        self.workspace = workspace  # device memory the plan's launches use (the prepass's fp16 A rows)
        self.graph = None
        self.alive = False
        self.last_used = 0
        self._refs = ()
        self._dead = dead

    def vouch(self, tensors) -> None:
        self._refs = list(map(weakref.ref, tensors, repeat(self._forget)))
        self.alive = True

    def _forget(self, _ref) -> None:
        if self.alive:
            self.alive = False
            self._dead.append(self.key)


class KernelPath:
    """A compiled CUDA path for one device: its launch plans and the per-call hot path.

    Plans are keyed by the queue and the call's full signature. The plans of one queue share one
    workspace (grown when a plan needs more): the queue runs them one after another, so no two of
    them use it at once. Plans whose tensors died are released at the next miss; at most `capacity`
    plans are kept, the least recently used one is released when a new one would exceed that. A
    lock makes the host side safe for threads, each on its own queue.
    """

    def __init__(self, lib: ctypes.CDLL, device: torch.device, capacity: int = 128):
        self.lib = lib
        self.arch = lib.nvfp4_arch()
        self.emulated = bool(lib.nvfp4_tcgen05_emulated())
        self.device_index = device.index if device.index is not None else torch.cuda.current_device()
        tile_m, tile_n, k_multiple, tile_shapes = (ctypes.c_int() for _ in range(4))
        self.lib.nvfp4_tile_rows(*map(ctypes.byref, (tile_m, tile_n, k_multiple, tile_shapes)))
        self.k_multiple = k_multiple.value
        self.num_sms = torch.cuda.get_device_properties(device).multi_processor_count
        self.tiles = TILES_CHOSEN  # or one of tile_shapes: the tile shape every new plan takes
        self.tile_shapes = tuple(range(tile_shapes.value)) if tile_shapes.value > 1 else (TILES_CHOSEN,)  # what the kernels can run
        self.capacity = capacity
        self._plans = {}
        self._dead = []  # keys of plans whose tensors died (appended by weakref callbacks)
        self._calls = 0  # the clock of last_used
        self._graph_launch = self.lib.nvfp4_graph_launch
        self._workspaces = {}  # queue handle -> the workspace its plans share
        self._retired = []  # smaller workspaces that larger ones replaced, kept (see _shared_workspace)
        self._lock = threading.RLock()
        err = ctypes.create_string_buffer(512)
        with torch.cuda.device(self.device_index):
            if self.lib.nvfp4_prepare_device(err, len(err)):  # kernels loaded and configured before any capture
                raise RuntimeError(f"nvfp4 grouped gemm: preparing the kernels failed: {err.value.decode()}")
        if self.emulated:
            seed = os.environ.get(EMULATION_SEED_ENV)
            self.configure_emulation(int(seed) if seed else int.from_bytes(os.urandom(4), "little"))

    def configure_emulation(self, seed: int, max_delay_ns: int = 20000) -> None:
        """The emulated tensor core's run: each operation runs at most max_delay_ns after its issue, the
        delays drawn from seed; an even seed runs operations lazily (only when a wait needs them), an
        odd one eagerly. A detector's message names the seed, so that NVFP4_EMULATION_SEED reproduces it."""
        rc = self.lib.nvfp4_emulation_configure(seed, max_delay_ns)
        if rc:
            raise RuntimeError(
                f"configuring the tcgen05 emulation failed: {'not an emulation build' if rc < 0 else self.lib.nvfp4_error_string(rc).decode()}"
            )
        self.emulation_seed = seed

    def __call__(self, tensors: list, sizes, operand_rank: int, alpha=None) -> None:
        """The grouped GEMM of `tensors` (layout.py) into their c tensors, times alpha where given, on
        the caller's current queue of the current device (where the tensors must be)."""
        device = _current_device()
        queue = current_queue(device)
        with self._lock:
            try:
                alpha_key = None if alpha is None else (_data_ptr(alpha), id(alpha))
                key = (device, queue, operand_rank, alpha_key, *map(_data_ptr, tensors), *map(id, tensors), *sizes)
                plan = self._plans.get(key)
            except (TypeError, AttributeError):  # non-tensors or unhashable sizes: validation says what is wrong
                validate(tensors, sizes, operand_rank, alpha)
                if any(type(size) is not tuple for size in sizes):  # sizes given as lists: the same problem
                    return self(tensors, [tuple(size) for size in sizes], operand_rank, alpha)
                raise
            self._calls += 1
            if plan is not None and plan.graph and plan.alive and not capturing():
                plan.last_used = self._calls
                rc = self._graph_launch(plan.graph, queue)
                if rc:
                    raise self._launch_error(rc)
                return
            self._uncached_call(key, plan, tensors, operand_rank, queue, alpha)

    def _launch_error(self, rc: int) -> RuntimeError:
        return RuntimeError(f"nvfp4 grouped gemm: cudaGraphLaunch failed: {self.lib.nvfp4_error_string(rc).decode()}")

    def _shared_workspace(self, queue: int):
        """The workspace of the queue's plans: a function of (nbytes, device) giving at least nbytes,
        grown by powers of two. No workspace is ever given back to torch's allocator, which would
        hand it to other work while a graph that bakes it in may still run; the ones a larger
        workspace replaced stay too (together at most the size of the current one)."""

        def workspace(nbytes: int, device: torch.device) -> torch.Tensor:
            current = self._workspaces.get(queue)
            if current is None or current.numel() < nbytes:
                if current is not None:
                    self._retired.append(current)
                current = self._workspaces[queue] = torch.empty(1 << (nbytes - 1).bit_length(), dtype=torch.uint8, device=device)
            return current

        return workspace

    def _uncached_call(self, key, plan, tensors, operand_rank: int, queue: int, alpha) -> None:
        capture = capturing()
        if not capture:  # nothing is destroyed during a capture
            self._release_dead(keep=key)  # a dead plan with this very key is revived below, after validation
        err = ctypes.create_string_buffer(512)
        count = len(tensors)
        device, pointers, sizes = key[0], key[4 : 4 + count], key[4 + 2 * count :]  # the key's layout: see __call__
        if plan is None or not plan.alive:
            if not (
                kernel_takes(tensors, sizes, pointers, self.k_multiple, device, operand_rank) and alpha_takes(alpha, len(sizes), device)
            ):
                validate(tensors, sizes, operand_rank, alpha)
                reason = kernel_unsupported(tensors, sizes, self.k_multiple, device)
                if reason:
                    warnings.warn(f"nvfp4 grouped gemm: {reason}; using the portable path", stacklevel=4)
                    portable_kernel(tensors, sizes, alpha)
                    return
        if capture:
            self._launch_into_capture(tensors, sizes, pointers, queue, err, alpha)
            return
        if plan is None:
            while len(self._plans) >= self.capacity:
                self._release(min(self._plans, key=lambda k: self._plans[k].last_used))
            made = create_plan(self.lib, tensors, sizes, self.num_sms, 0, err, self._shared_workspace(queue), pointers, self.tiles, alpha)
            plan = self._plans[key] = _Plan(key, *made, self._dead)
            if self.lib.nvfp4_plan_launch(plan.handle, queue, err, len(err)):
                raise RuntimeError(f"nvfp4 grouped gemm: launch failed: {err.value.decode()}")
        else:
            if not plan.graph:
                graph = ctypes.c_void_p()
                if self.lib.nvfp4_plan_instantiate(plan.handle, ctypes.byref(graph), err, len(err)):
                    raise RuntimeError(f"nvfp4 grouped gemm: graph build failed: {err.value.decode()}")
                plan.graph = graph.value
            rc = self._graph_launch(plan.graph, queue)
            if rc:
                raise self._launch_error(rc)
        plan.last_used = self._calls
        if not plan.alive:
            plan.vouch(tensors if alpha is None else [*tensors, alpha])

    def _launch_into_capture(self, tensors, sizes, pointers, queue: int, err, alpha) -> None:
        """The call's kernels captured into the caller's graph: a plan for this call alone, its
        workspace from torch's allocator inside the capture (the capture's pool, which the graph keeps
        while it lives), no private graph, no host sync."""
        handle, workspace = create_plan(self.lib, tensors, sizes, self.num_sms, 0, err, new_workspace, pointers, self.tiles, alpha)
        try:
            if self.lib.nvfp4_plan_launch(handle, queue, err, len(err)):
                raise RuntimeError(f"nvfp4 grouped gemm: launch into the graph capture failed: {err.value.decode()}")
        finally:
            self.lib.nvfp4_plan_destroy(handle)  # the captured kernels hold copies of its arguments

    def _release_dead(self, keep) -> None:
        while self._dead:
            plan = self._plans.get(self._dead.pop())
            if plan is not None and not plan.alive and plan.key != keep:
                self._release(plan.key)

    def _release(self, key) -> None:
        """Drop a plan: its graph is destroyed (CUDA frees an executable graph still in flight when it
        completes); the workspace stays with the path."""
        plan = self._plans.pop(key)
        self.lib.nvfp4_plan_destroy(plan.handle)
        plan.workspace = None  # now, not when the cycle plan -> weakref -> callback is collected
        plan._refs = ()


def new_workspace(nbytes: int, device: torch.device) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def create_plan(
    lib: ctypes.CDLL,
    tensors: list,
    sizes,
    num_sms: int,
    dry_run: int,
    err,
    workspace=new_workspace,
    pointers=None,
    tiles: int = TILES_CHOSEN,
    alpha: torch.Tensor | None = None,
) -> tuple[int, torch.Tensor | None]:
    """A C++ plan for the call (tensors, sizes and alpha as layout.py describes them; C's dtype from
    group 0's c) and the workspace it uses (keep it alive as long as the plan).

    workspace(nbytes, device) gives the device memory, when the plan needs any. pointers: the
    tensors' data pointers, when the caller has them. Returns (handle, workspace or None); dry_run
    and tiles as nvfp4_plan_create takes them. ValueError on refusal.
    """
    if pointers is None:
        pointers = [t.data_ptr() for t in tensors]
    g = len(sizes)
    packed = (GroupDesc * g)()
    for i, (m, n, k, _) in enumerate(sizes):
        a, b, c = pointers[3 * i : 3 * i + 3]
        sfa, sfb = pointers[3 * g + 2 * i : 3 * g + 2 * i + 2]
        packed[i] = GroupDesc(a=a, b=b, c=c, sfa=sfa, sfb=sfb, m=m, n=n, k=k)
    nbytes = lib.nvfp4_workspace_bytes(packed, g)
    buffer = workspace(nbytes, tensors[0].device) if nbytes else None
    handle = ctypes.c_void_p()
    pointer = buffer.data_ptr() if buffer is not None else None
    alpha_pointer = alpha.data_ptr() if alpha is not None else None
    out_bf16 = int(tensors[2].dtype == torch.bfloat16)
    if lib.nvfp4_plan_create(packed, g, num_sms, tiles, dry_run, pointer, alpha_pointer, out_bf16, ctypes.byref(handle), err, len(err)):
        raise ValueError(f"nvfp4 grouped gemm: {err.value.decode()}")
    return handle.value, buffer


def check_on_current_device(tensor: torch.Tensor, current: int) -> None:
    """ValueError unless `tensor` is on the current CUDA device (index `current`), where the kernels run."""
    if tensor.get_device() != current:
        raise ValueError(
            f"nvfp4 grouped gemm: the tensors are on {tensor.device}, the current device is cuda:{current}; make theirs "
            f"current (torch.cuda.set_device, or a torch.cuda.device block)"
        )


def kernel_unsupported(tensors: list, sizes, k_multiple: int, device_index: int) -> str | None:
    """Why the CUDA kernel cannot take this (valid) input, or None when it can. Tensors on another
    device than the current one are an error: the kernels run on the current device."""
    check_on_current_device(tensors[0], device_index)
    for g, (m, n, k, _) in enumerate(sizes):
        if not (m and n):
            continue  # no output: the kernel reads and writes nothing of this group
        if n % 8:
            return f"group {g}: N={n} is not a multiple of 8"
        if m > KERNEL_MAX_M or n > KERNEL_MAX_N:
            return f"group {g}: M={m}, N={n}: the kernels' tiles take M up to {KERNEL_MAX_M} and N up to {KERNEL_MAX_N}"
        if k % k_multiple:
            return f"group {g}: K={k} is not a multiple of {k_multiple}"
        scale_strides = packed_scale_strides(k)
        for name, t, strides in zip(
            ("a", "b", "c", "sfa", "sfb"), group_tensors(tensors, g), (None, None, None, scale_strides, scale_strides)
        ):
            if t.data_ptr() % 16:
                return f"group {g}: {name} is not 16-byte aligned"
            if strides is None:
                packed = t.is_contiguous()
            else:  # the reordered layout: a permuted view; dimensions of size 1 may have any stride
                packed = t.stride()[:5] == strides or all(s == 1 or st == w for s, st, w in zip(t.shape, t.stride(), strides))
            if not packed:
                return f"group {g}: {name} has strides {t.stride()}, the kernels need the packed layout"
    return None


@lru_cache(maxsize=256)
def _expected_layout(sizes: tuple, k_multiple: int, operand_rank: int) -> tuple[list, list, list | None] | None:
    """For problem sizes that validate() and kernel_unsupported() accept whatever the tensors: the
    shapes of the call's tensors, the first five strides of the scale tensors of groups with output,
    and per tensor whether the kernel reads or writes it (its group has M, N > 0; None when all do).
    None for any other sizes (the caller then runs the full checks, which say what is wrong)."""
    shapes, scale_shapes, scale_strides, used = [], [], [], []
    for size in sizes:
        if type(size) is not tuple or len(size) != 4 or any(type(v) is not int for v in size):
            return None
        m, n, k, l = size
        if l != 1 or k <= 0 or k % 64 or (m and n and (k % k_multiple or n % 8 or m > KERNEL_MAX_M or n > KERNEL_MAX_N)):
            return None
        group = group_shapes(m, n, k, operand_rank)
        shapes += group[:3]
        scale_shapes += group[3:]
        scale_strides += [packed_scale_strides(k)] * 2 if m and n else []
        used.append(bool(m and n))
    tensor_used = [u for u in used for _ in range(3)] + [u for u in used for _ in range(2)]
    return shapes + scale_shapes, scale_strides, None if all(used) else tensor_used


_FP4, _E4M3 = frozenset(FP4_DTYPES), frozenset(E4M3_DTYPES)
_OUT = [{dtype} for dtype in OUT_DTYPES]  # every group's c of one of them
_shape_of, _dtype_of = attrgetter("shape"), attrgetter("dtype")


def kernel_takes(tensors: list, sizes: tuple, pointers, k_multiple: int, device_index: int, operand_rank: int) -> bool:
    """True when validate() and kernel_unsupported() would both pass with every tensor on device
    `device_index` (the current device), checked in bulk: C-level maps over the tensors instead of
    a check per attribute (about a third less host time for 8 groups). False means: run them to
    learn why not (they also accept a few rarer layouts that this check does not). `pointers` are
    the tensors' data pointers (so each one is a torch.Tensor)."""
    layout = _expected_layout(sizes, k_multiple, operand_rank)
    g = len(sizes)
    if layout is None or not g or len(tensors) != 5 * g:
        return False
    shapes, scale_strides, used = layout
    abc_flat, scales = tensors[: 3 * g], tensors[3 * g :]
    abc_used, scales_used = abc_flat, scales
    if used is not None:  # groups with no output have no layout to check
        abc_used, scales_used, pointers = [*compress(abc_flat, used)], [*compress(scales, used[3 * g :])], [*compress(pointers, used)]
    return (
        list(map(_shape_of, tensors)) == shapes
        and set(map(_dtype_of, abc_flat[0::3] + abc_flat[1::3])) <= _FP4
        and set(map(_dtype_of, abc_flat[2::3])) in _OUT
        and set(map(_dtype_of, scales)) <= _E4M3
        and set(map(torch.Tensor.get_device, tensors)) == {device_index}
        and not reduce(or_, pointers, 0) & 15  # every pointer the kernel reads or writes 16-byte aligned
        and all(map(torch.Tensor.is_contiguous, abc_used))
        and [s[:5] for s in map(torch.Tensor.stride, scales_used)] == scale_strides
    )


def alpha_takes(alpha, groups: int, device_index: int) -> bool:
    """True when alpha is absent, or a contiguous float32 [groups] tensor on device `device_index`."""
    return alpha is None or (
        type(alpha) is torch.Tensor
        and alpha.dtype == torch.float32
        and alpha.shape == (groups,)
        and alpha.get_device() == device_index
        and alpha.is_contiguous()
    )
