"""The launches of a plan made for an input and never launched: the kernel each one would run."""

import ctypes
from typing import NamedTuple

from nvfp4.kernel_path import KernelPath, create_plan
from nvfp4.layout import from_leaderboard


class Launch(NamedTuple):
    ctas: int
    tiles: int
    persistent: bool  # sm_100a: the kernel with the TMEM double buffer
    fixed_n8: int  # sm_90a: the kernel built for wgmma N = 8 * fixed_n8; 0: the one choosing each tile's N
    shape: int  # the tile shape (nvfp4.kernel_path.TILES_*)


def launches(path: KernelPath, data) -> list[Launch]:
    handle, _ = create_plan(path.lib, *from_leaderboard(data), path.num_sms, 1, ctypes.create_string_buffer(256), tiles=path.tiles)
    try:
        out = []
        for launch in range(path.lib.nvfp4_plan_launch_count(handle)):
            grid, persistent, fixed_n8, shape, tiles = (ctypes.c_int() for _ in range(5))
            path.lib.nvfp4_plan_launch_info(
                handle,
                launch,
                *map(ctypes.byref, (grid, persistent, fixed_n8, shape, tiles)),
                (ctypes.c_uint32 * 4096)(),
                (ctypes.c_uint16 * 300)(),
            )
            out.append(Launch(grid.value, tiles.value, bool(persistent.value), fixed_n8.value, shape.value))
        return out
    finally:
        path.lib.nvfp4_plan_destroy(handle)
