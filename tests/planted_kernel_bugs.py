"""The deliberately broken builds of the sm_100a kernel that tests/kernels/test_tcgen05_emulation.py
runs under the tcgen05 emulation, as text edits of csrc/ (tools.nvcc_build.replacing): layout bugs,
which must give a wrong result, and synchronization bugs, which the emulation's detectors must
report. tests/kernels/test_planted_kernel_bugs.py checks on any machine that each edit still finds
its text in csrc/ once."""

# The layout bugs: (the text, its broken form).
BROKEN = {
    "A/B descriptors without the 128-byte swizzle": ("| 1ull << 46 | 2ull << 61;", "| 1ull << 46 | 0ull << 61;"),
    "scale columns of the next 32 rows": (
        "instr_desc(piece_n<kShape>(tc, p), 128 * kGroup), tmem + Tmem::kSfM + k * 4,",
        "instr_desc(piece_n<kShape>(tc, p), 128 * kGroup), tmem + Tmem::kSfM + k * 4 + 1,",
    ),
    # The swapped tiles' own parts: the N side's second piece, and the epilogue's transpose.
    "swapped: the second N piece reads the first piece's A rows": ("desc_ab(n_tile + p * 128 * 128 + k * 32)", "desc_ab(n_tile + k * 32)"),
    "swapped: the staging written untransposed": (
        "rows[j * 32 + lane] = uint16_t(two), rows[(j + 1) * 32 + lane] = uint16_t(two >> 16);",
        "rows[lane * 32 + j] = uint16_t(two), rows[lane * 32 + j + 1] = uint16_t(two >> 16);",
    ),
    # The pair's split: the odd CTA loading the even one's half of A, or of B.
    "pair: both CTAs load the first half of the A rows": ("a_row = tc.off_m + int(rank) * S::kCtaRowsA", "a_row = tc.off_m"),
    "pair: both CTAs load the first half of the B rows": (
        "(job.n_block * S::kCtaGroup + int(rank)) * S::kRowsB",
        "(job.n_block * S::kCtaGroup) * S::kRowsB",
    ),
}

# The synchronization bugs.
EPILOGUE_WAIT = "    mbar_wait_or_trap<S::kIsPair>(bars.mainloop(buffer), mainloop_phase);\n"
RELEASE = "      commit<kShape>(bars.mma(stage));  // frees the stage once these MMAs have read it\n"
STAGE_LOADED = "      mbar_wait_or_trap<S::kIsPair>(bars.tma(stage), tma_phase);\n      tcgen05_fence_after_sync();\n"
PLANTED = {  # edits, CTAs (2: the persistent variant; 148: one tile each), problem (m, n, k), the detector's message
    # (for a read of the accumulator: "... nothing has written ..." or "... a queued operation has not yet written ...",
    # whichever the MMA's issue order makes it)
    "the epilogue reads the accumulator without waiting for its commit": (
        [(EPILOGUE_WAIT, "")],
        2,
        ((256, 128), (256, 128), (512, 256)),
        "tcgen05.ld of TMEM columns",
    ),
    "the producer reuses a stage before the MMAs read it (the release committed before them)": (
        [(RELEASE, ""), (STAGE_LOADED, STAGE_LOADED + RELEASE)],
        2,
        ((128,), (256,), (2048,)),
        "TMA load into shared memory a pending operation still reads",
    ),
    "the single-tile kernel without its completion wait (a fresh barrier's previous phase)": (
        [("  uint32_t mainloop_phase = 0;\n", "  uint32_t mainloop_phase = kPersistent ? 0 : 1;\n")],
        148,
        ((128, 64), (256, 128), (512, 256)),
        "tcgen05.ld of TMEM columns",
    ),
}
