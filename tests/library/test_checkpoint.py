"""nvfp4.load_experts: ModelOpt and compressed-tensors checkpoints (either projection naming, one file,
a directory of shards or a state dict) read into the nvfp4.Experts their tensors make, bit for bit,
and bad checkpoints refused with a message that names what is wrong. CPU only."""

import pytest
import torch
from safetensors.torch import save_file

import nvfp4

PREFIX = "model.layers.3.mlp.experts"
EXPERTS, HIDDEN, INTER = 4, 128, 64
ROLES = {"gate": INTER, "up": INTER, "down": HIDDEN}  # rows of each projection's weight
NAMES = {
    "gate_proj/up_proj/down_proj": {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"},
    "w1/w3/w2": {"gate": "w1", "up": "w3", "down": "w2"},
}


def powers_of_two(low: int, high: int, shape, generator: torch.Generator) -> torch.Tensor:
    return torch.exp2(torch.randint(low, high, shape, generator=generator).float())


def quantized_layer(seed: int, gate_up_share_scale: bool = True) -> dict:
    """role -> (codes uint8 [E, N, K/2], block scales E4M3 [E, N, K/16], weight_scale_2 [E], input_scale
    [E]) of random full-range data: every byte of codes, positive E4M3 scales (0x08..0x7E), global
    scales that are powers of two (their reciprocals are exact, so both formats hold the same values)."""
    g = torch.Generator().manual_seed(seed)
    layer = {}
    for role, rows in ROLES.items():
        k = INTER if role == "down" else HIDDEN
        codes = torch.randint(256, (EXPERTS, rows, k // 2), generator=g, dtype=torch.uint8)
        scales = torch.randint(0x08, 0x7F, (EXPERTS, rows, k // 16), generator=g, dtype=torch.uint8).view(torch.float8_e4m3fn)
        layer[role] = [codes, scales, powers_of_two(-20, -6, (EXPERTS,), g), powers_of_two(-12, -2, (EXPERTS,), g)]
    if gate_up_share_scale:
        layer["up"][2] = layer["gate"][2]
    layer["up"][3] = layer["gate"][3]  # gate and up quantize the same activations
    return layer


def checkpoint(layer: dict, fmt: str = "modelopt", naming: str = "gate_proj/up_proj/down_proj", experts=range(EXPERTS)) -> dict:
    """The layer's tensors under PREFIX, as a ModelOpt checkpoint stores them (global scales of shape
    []) or a compressed-tensors one (their reciprocals, of shape [1])."""
    tensors = {}
    for e in experts:
        for role, (codes, scales, weight_scale_2, input_scale) in layer.items():
            name = f"{PREFIX}.{e}.{NAMES[naming][role]}"
            if fmt == "modelopt":
                tensors.update(
                    {
                        f"{name}.weight": codes[e],
                        f"{name}.weight_scale": scales[e],
                        f"{name}.weight_scale_2": weight_scale_2[e].reshape(()),
                        f"{name}.input_scale": input_scale[e].reshape(()),
                    }
                )
            else:
                tensors.update(
                    {
                        f"{name}.weight_packed": codes[e],
                        f"{name}.weight_scale": scales[e],
                        f"{name}.weight_global_scale": (1.0 / weight_scale_2[e]).reshape(1),
                        f"{name}.input_global_scale": (1.0 / input_scale[e]).reshape(1),
                    }
                )
    return {key: t.clone() for key, t in tensors.items()}  # one storage each, as save_file requires


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8)


def assert_same_experts(got: nvfp4.Experts, expected: nvfp4.Experts) -> None:
    for name in ("w13", "w13_scale", "w13_input_scale", "w13_alpha", "w2", "w2_scale", "w2_input_scale", "w2_alpha"):
        a, b = getattr(got, name), getattr(expected, name)
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b)), name


@pytest.mark.parametrize("naming", NAMES)
def test_modelopt_checkpoint_loads_in_either_naming(tmp_path, naming):
    """w13 is gate's codes then up's, its scales the blocked form of theirs, w2 and its scales down's,
    and alpha input_scale * weight_scale_2 per expert, in float32."""
    layer = quantized_layer(0)
    save_file(checkpoint(layer, naming=naming), str(tmp_path / "model.safetensors"))
    experts = nvfp4.load_experts(tmp_path / "model.safetensors", PREFIX, experts=EXPERTS)
    (gate, gate_scale, ws2, in13), (up, up_scale, _, _), (down, down_scale, ws2_down, in2) = layer["gate"], layer["up"], layer["down"]
    assert (experts.num_experts, experts.hidden, experts.intermediate) == (EXPERTS, HIDDEN, INTER)
    assert torch.equal(experts.w13, torch.cat([gate, up], 1))
    assert torch.equal(bits(experts.w13_scale), nvfp4.blocked_from_plain(bits(torch.cat([gate_scale, up_scale], 1))))
    assert torch.equal(experts.w2, down)
    assert torch.equal(bits(experts.w2_scale), nvfp4.blocked_from_plain(bits(down_scale)))
    assert experts.w13_alpha.dtype == torch.float32 and torch.equal(experts.w13_alpha, in13 * ws2)
    assert experts.w2_alpha.dtype == torch.float32 and torch.equal(experts.w2_alpha, in2 * ws2_down)


def test_compressed_tensors_checkpoint_loads_as_modelopt(tmp_path):
    """The same quantized weights with compressed-tensors' names and reciprocal global scales load to
    the same experts bit for bit: the scales are powers of two, so 1 / (1 / x) is x exactly (for other
    values the two roundings of float32 division may differ from x in the last bit)."""
    layer = quantized_layer(1)
    save_file(checkpoint(layer, "modelopt"), str(tmp_path / "modelopt.safetensors"))
    save_file(checkpoint(layer, "compressed-tensors", naming="w1/w3/w2"), str(tmp_path / "compressed.safetensors"))
    assert_same_experts(
        nvfp4.load_experts(tmp_path / "compressed.safetensors", PREFIX), nvfp4.load_experts(tmp_path / "modelopt.safetensors", PREFIX)
    )


def test_both_formats_give_the_same_layer_output(tmp_path):
    """The same quantized weights in the two formats: fused_moe's output from each, bit for bit, finite
    and not all zero (the layer's own tests hold its values against a float64 emulation)."""
    layer = quantized_layer(5)
    save_file(checkpoint(layer, "modelopt"), str(tmp_path / "modelopt.safetensors"))
    save_file(checkpoint(layer, "compressed-tensors"), str(tmp_path / "compressed.safetensors"))
    g = torch.Generator().manual_seed(6)
    x = torch.randn(7, HIDDEN, generator=g).to(torch.bfloat16)
    weights, ids = torch.topk(torch.softmax(torch.randn(7, EXPERTS, generator=g), -1), 2, -1)
    outputs = [
        nvfp4.fused_moe(x, weights, ids, nvfp4.load_experts(tmp_path / name, PREFIX))
        for name in ("modelopt.safetensors", "compressed.safetensors")
    ]
    assert torch.isfinite(outputs[0]).all() and outputs[0].any()
    assert torch.equal(outputs[0], outputs[1])


@pytest.mark.parametrize("fmt", ["modelopt", "compressed-tensors"])
def test_gate_and_up_weight_scales_each_scale_their_own_columns(fmt):
    """With different weight_scale_2 for gate and up, w13's alpha is [E, 2F]: gate's columns
    input_scale * gate's, up's input_scale * up's, exactly."""
    layer = quantized_layer(2, gate_up_share_scale=False)
    experts = nvfp4.load_experts(checkpoint(layer, fmt), PREFIX)
    in13, gate_ws2, up_ws2 = layer["gate"][3], layer["gate"][2], layer["up"][2]
    assert experts.w13_alpha.shape == (EXPERTS, 2 * INTER)
    assert torch.equal(experts.w13_alpha[:, :INTER], (in13 * gate_ws2)[:, None].expand(EXPERTS, INTER))
    assert torch.equal(experts.w13_alpha[:, INTER:], (in13 * up_ws2)[:, None].expand(EXPERTS, INTER))


def test_directory_of_shards_and_state_dict_load_as_one_file(tmp_path):
    """Experts split across two shards (with another layer's tensors beside them) and the plain state
    dict load the same as one file."""
    layer = quantized_layer(3)
    save_file(checkpoint(layer), str(tmp_path / "model.safetensors"))
    shards = tmp_path / "shards"
    shards.mkdir()
    other_layer = {key.replace(".3.", ".4."): t for key, t in checkpoint(layer, experts=[0]).items()}
    save_file({**checkpoint(layer, experts=[0, 1]), **other_layer}, str(shards / "model-00001-of-00002.safetensors"))
    save_file(checkpoint(layer, experts=[2, 3]), str(shards / "model-00002-of-00002.safetensors"))
    one_file = nvfp4.load_experts(tmp_path / "model.safetensors", PREFIX)
    assert_same_experts(nvfp4.load_experts(shards, PREFIX), one_file)
    assert_same_experts(nvfp4.load_experts(dict(checkpoint(layer)), PREFIX), one_file)


def drop_expert_2(tensors):
    return {key: t for key, t in tensors.items() if not key.startswith(f"{PREFIX}.2.")}


def drop_up_scale(tensors):
    return {key: t for key, t in tensors.items() if key != f"{PREFIX}.1.up_proj.weight_scale"}


def mix_namings(tensors):
    return {key.replace(".3.gate_proj.", ".3.w1."): t for key, t in tensors.items()}


def float32_block_scales(tensors):
    return {**tensors, f"{PREFIX}.0.down_proj.weight_scale": tensors[f"{PREFIX}.0.down_proj.weight_scale"].float()}


def narrower_expert(tensors):
    return {**tensors, f"{PREFIX}.2.down_proj.weight": tensors[f"{PREFIX}.2.down_proj.weight"][:, :16]}


def both_formats(tensors):
    return {**tensors, f"{PREFIX}.0.gate_proj.weight_packed": tensors[f"{PREFIX}.0.gate_proj.weight"]}


@pytest.mark.parametrize(
    "damage, message",
    [
        (drop_expert_2, "has no expert 2"),
        (drop_up_scale, r"experts\.1\.up_proj\.weight_scale is missing"),
        (mix_namings, "gate_proj/up_proj/down_proj or w1/w3/w2.*found down_proj, gate_proj, up_proj, w1"),
        (float32_block_scales, r"experts\.0\.down_proj\.weight_scale has dtype torch.float32, expected torch.float8_e4m3fn"),
        (narrower_expert, r"experts\.2\.down_proj\.weight has shape \(128, 16\)"),
        (both_formats, "one format; found input_scale, weight, weight_packed"),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_bad_checkpoint_is_refused_naming_the_problem(damage, message):
    """A missing expert or tensor, mixed namings or formats, a wrong dtype and a shape that differs
    between experts are each a ValueError that says which."""
    with pytest.raises(ValueError, match=message):
        nvfp4.load_experts(damage(checkpoint(quantized_layer(4))), PREFIX)


def test_expert_count_is_checked_where_given():
    """experts= is the count the layer must have."""
    with pytest.raises(ValueError, match="has 4 experts, expected 8"):
        nvfp4.load_experts(checkpoint(quantized_layer(5)), PREFIX, experts=8)


@pytest.mark.parametrize("prefix", [None, "", 3])
def test_a_prefix_that_is_not_a_name_is_refused(prefix):
    with pytest.raises(ValueError, match="prefix must be the experts' name prefix"):
        nvfp4.load_experts(checkpoint(quantized_layer(2)), prefix)
