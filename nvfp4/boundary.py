"""The boundary between the Python and the CUDA library, declared once: the C API's prototypes and
the descriptors a call's arguments cross in. tools/gen_boundary.py writes the C side from this
table (csrc/boundary_generated.cuh: the descriptors as structs, the prototypes, which the
definitions in csrc/nvfp4.cu must match, and the layout report); bind() gives a loaded library the
ctypes side, and refuses one whose descriptors lie elsewhere than this table says (a build of other
sources).

Every descriptor field is an int64 (a device pointer as its address, a size or a flag), so that
neither side pads. A pointer argument that is not a descriptor crosses as an address (c_void_p:
an int, a ctypes array, byref() or a NumPy array's data_as all do), `char*` as an error buffer.
"""

import ctypes

DESCRIPTORS = {
    "GroupDesc": (  # one group of the list form; nvfp4_workspace_bytes and nvfp4_plan_create take an array
        ("a", "A: packed FP4 rows [M][K/2]"),
        ("b", "B: packed FP4 rows [N][K/2]"),
        ("c", "C: [M][N] fp16 or bf16"),
        ("sfa", "A's E4M3 scales in the reordered layout"),
        ("sfb", "B's"),
        ("m", "rows of A and C"),
        ("n", "rows of B, columns of C"),
        ("k", "the reduction's length (a multiple of 64)"),
    ),
    "ExpertDesc": (  # a call of the MoE forms (host/experts.cuh)
        ("a", "A: packed FP4 rows [total_rows][K/2]"),
        ("b", "B: every expert's packed FP4 rows [E][N][K/2]"),
        ("c", "C: [total_rows][N]"),
        ("sfa", "A's scales, blocked [sf_rows/128][K/64][512]"),
        ("sfb", "B's, blocked, expert after expert"),
        ("masked_m", "masked form: int32 [E] rows of each expert; 0 in the offset form"),
        ("offsets", "offset form: int32 [E + 1] first row of each expert, then the total; 0 in the masked form"),
        ("sf_offsets", "offset form: int32 [E] first scale row of each expert; 0 in the masked form"),
        ("experts", "E"),
        ("total_rows", "rows of A and C"),
        ("rows_per_expert", "masked form: rows each expert has room for"),
        ("sf_rows", "scale rows of sfa"),
        ("n", "N"),
        ("k", "K"),
        ("alpha", "float32 device array of the epilogue's factors, 0 for none"),
        ("alpha_stride", "alpha's stride along C's columns: 0 one per expert, 1 [E][N]"),
        ("out_bf16", "1 for bf16 C, 0 for fp16"),
    ),
    "QuantizeDesc": (  # a call of the quantization (quantize.cuh)
        ("x", "fp16 or bf16 [batch][rows][K]"),
        ("q", "codes out: [batch][rows][K/2]"),
        ("sf", "scales out, blocked"),
        ("masked_m", "int32 [batch] rows to quantize, 0 for all"),
        ("batch", "batch entries"),
        ("rows", "rows per entry"),
        ("k", "K"),
        ("bf16", "1 for bf16 x"),
        ("global_scale", "float32 device array, 0 for none"),
        ("global_scale_batch_stride", "its stride per batch entry"),
        ("global_scale_row_stride", "its stride per row"),
        ("source_row", "routed form: int32 source row of each routed row, 0 when not routed"),
        ("offsets", "routed form: int32 [E + 1] first row of each expert"),
        ("sf_offsets", "routed form: int32 [E] first scale row of each expert"),
        ("experts", "routed form: E"),
    ),
}

ENTRY_POINTS = (
    # the list form: plans and their launches
    "int64_t nvfp4_workspace_bytes(const GroupDesc* groups, int num_groups)",
    "int nvfp4_plan_create(const GroupDesc* groups, int num_groups, int num_sms, int tiles, int dry_run, void* workspace, "
    "const float* alpha, int out_bf16, void** plan_out, char* err, int err_len)",
    "int nvfp4_prepare_device(char* err, int err_len)",
    "int nvfp4_plan_launch(void* plan, void* queue, char* err, int err_len)",
    "int nvfp4_plan_instantiate(void* plan, void** graph_out, char* err, int err_len)",
    "int nvfp4_graph_launch(void* graph, void* queue)",
    "const char* nvfp4_error_string(int code)",
    "void nvfp4_plan_destroy(void* plan)",
    # the MoE forms and quantization
    "int64_t nvfp4_experts_workspace_bytes(const ExpertDesc* desc)",
    "int nvfp4_experts_launch(const ExpertDesc* desc, int num_sms, void* workspace, void* queue, char* err, int err_len)",
    "int nvfp4_quantize(const QuantizeDesc* desc, int num_sms, void* queue, char* err, int err_len)",
    # inspection, for tests, the dry run and the benchmarks
    "int nvfp4_arch()",
    "int nvfp4_tcgen05_emulated()",
    "int nvfp4_read_timeline(unsigned long long* out)",
    "int nvfp4_emulation_configure(uint64_t seed, uint32_t max_delay_ns)",
    "int nvfp4_plan_launch_count(void* plan)",
    "int nvfp4_plan_launch_info(void* plan, int launch, int* grid, int* persistent, int* fixed_n8, int* shape, int* num_tiles, "
    "uint32_t* tiles, uint16_t* cta_first)",
    "int nvfp4_plan_group(void* plan, int launch, int g, int64_t* out, uint8_t* tmap_a, uint8_t* tmap_b)",
    "int nvfp4_tile_rows(int* tile_m, int* tile_n, int* k_multiple, int* tile_shapes)",
    "int nvfp4_schedule(const int* mnk, int num_groups, int num_sms, int max_pairs, int tiles, int* out, int capacity)",
    "int nvfp4_tmem_plan(int shape, int persistent, int* out)",
    "int nvfp4_tile_shape(int shape, int* a_rows, int* b_rows, int* ctas)",
    "void nvfp4_expert_kernel_choice(int most_rows, int experts, int n, int k, int units, int* shape, int* fixed_n8)",
    "int nvfp4_fixed_n8_at_least(int n8, int shape)",
    "int64_t nvfp4_scale_byte(int row, int sf_col, int k)",
    "int nvfp4_expert_walk(int total, int unit, int units, int* tiles, int capacity)",
    "int64_t nvfp4_quantize_walk(int batch, int padded_rows, int units_per_row, int64_t first, int64_t stride, int* out, int64_t capacity)",
    "void nvfp4_quantize_blocks_on_host(const uint16_t* x, int64_t blocks, int bf16, const float* global_scale, uint8_t* codes, "
    "uint8_t* scales)",
    "void nvfp4_decode_words_on_host(const uint32_t* words, int64_t n, uint32_t* all_codes, uint32_t* code_pairs)",
    # the descriptors' layout by name (generated; -1 for a name it lacks), which bind() compares with DESCRIPTORS
    "int64_t nvfp4_descriptor_size(const char* descriptor)",
    "int64_t nvfp4_descriptor_offset(const char* descriptor, const char* field)",
)
OPTIONAL = frozenset({"nvfp4_read_timeline"})  # in bench/timeline.py's build only


def structs_of(descriptors: dict) -> dict:
    """The ctypes structure of each descriptor of a table: int64 fields in the table's order."""
    return {
        name: type(name, (ctypes.Structure,), {"_fields_": [(f, ctypes.c_int64) for f, _ in fields]})
        for name, fields in descriptors.items()
    }


STRUCTS = structs_of(DESCRIPTORS)
GroupDesc, ExpertDesc, QuantizeDesc = STRUCTS["GroupDesc"], STRUCTS["ExpertDesc"], STRUCTS["QuantizeDesc"]
_SCALARS = {
    "void": None,
    "int": ctypes.c_int,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "uint32_t": ctypes.c_uint32,
}


def ctype_of(c_type: str):
    """The ctypes type a C type of the table crosses as."""
    bare = c_type.replace("const ", "").replace(" ", "")
    if bare == "char*":
        return ctypes.c_char_p
    if bare.endswith("*"):
        pointee = bare[:-1]
        return ctypes.POINTER(STRUCTS[pointee]) if pointee in STRUCTS else ctypes.c_void_p
    return _SCALARS[bare]


def parse(prototype: str) -> tuple[str, str, list[str]]:
    """(return type, name, parameter types) of one of ENTRY_POINTS."""
    head, params = prototype.rstrip(")").split("(", 1)
    returns, name = head.rsplit(None, 1)
    while name.startswith("*"):  # "const char* f" splits as ("const char*", "f"); "char *f" would not
        returns, name = returns + "*", name[1:]
    types = [p.strip().rsplit(None, 1)[0] for p in params.split(",") if p.strip()]
    return returns, name, types


def bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    """lib with every entry point's ctypes signature; RuntimeError when its descriptors' layout is not
    this table's."""
    entries = [parse(prototype) for prototype in ENTRY_POINTS]
    missing = [name for _, name, _ in entries if name not in OPTIONAL and not hasattr(lib, name)]
    if missing:
        raise RuntimeError(
            f"the CUDA library lacks entry points nvfp4/boundary.py declares (a build of other sources?): {', '.join(missing)}"
        )
    for returns, name, types in entries:
        if hasattr(lib, name):
            function = getattr(lib, name)
            function.restype, function.argtypes = ctype_of(returns), [ctype_of(t) for t in types]
    check_layout(lib)
    return lib


def layout_differences(lib: ctypes.CDLL) -> list[str]:
    """Where the library's descriptors differ from this table's ctypes structures: one line each."""
    differences = []
    for name, fields in DESCRIPTORS.items():
        struct = STRUCTS[name]
        size = lib.nvfp4_descriptor_size(name.encode())
        if size != ctypes.sizeof(struct):
            differences.append(f"{name} is {size} bytes in the library, {ctypes.sizeof(struct)} here")
        for field, _ in fields:
            offset = lib.nvfp4_descriptor_offset(name.encode(), field.encode())
            if offset != getattr(struct, field).offset:
                where = f"lies at byte {offset}" if offset >= 0 else "is missing"
                differences.append(f"{name}.{field} {where} in the library, at byte {getattr(struct, field).offset} here")
    return differences


def check_layout(lib: ctypes.CDLL) -> None:
    differences = layout_differences(lib)
    if differences:
        raise RuntimeError(
            "the CUDA library was built from other sources than nvfp4/boundary.py describes (run make bundle, then rebuild): "
            + "; ".join(differences)
        )
