"""FP8 weights through compressed-tensors: quantize one weight, dequantize tensors back for the reference engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from eaglehub.errors import EaglehubError


def itemsize(dtype: str) -> int:
    from eaglehub.io.stformat import DTYPE_BY_TORCH

    return DTYPE_BY_TORCH[dtype].bits // 8


def compressed_tensors_version() -> str:
    from compressed_tensors import __version__

    return __version__


def quantize_weight(weight, scheme: str) -> tuple:
    """``(float8_e4m3fn weight [out, in], weight_scale)`` of one Linear weight through compressed-tensors (Route 1 of
    docs/quantization.md §4). ``weight_scale``: ``[out, 1]`` (fp8-dynamic) or ``[⌈out/128⌉, ⌈in/128⌉]`` (fp8-block),
    in ``weight``'s dtype; ``weight ≈ fp8 · scale`` (broadcast per row or block) within FP8 rounding
    (3 mantissa bits: relative error ≤ 2⁻⁴ per element above the subnormal range)."""
    import torch
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.config import CompressionFormat
    from compressed_tensors.quantization import QuantizationStatus
    from compressed_tensors.quantization.lifecycle.initialize import initialize_module_for_quantization
    from compressed_tensors.quantization.utils import calculate_qparams, maybe_pad_tensor_for_block_quant

    sch = scheme_preset(scheme)
    args = sch.weights
    out, inp = weight.shape
    with torch.no_grad():
        lin = torch.nn.Linear(inp, out, bias=False, dtype=weight.dtype)
        lin.weight.copy_(weight)
        initialize_module_for_quantization(lin, sch)
        x = weight.float()
        if args.block_structure:
            bn, bk = args.block_structure  # padding with zeros leaves every block's max|w| as it is
            blocks = maybe_pad_tensor_for_block_quant(x, (bn, bk)).unflatten(0, (-1, bn)).unflatten(-1, (-1, bk))
            lo, hi = blocks.amin(dim=(1, 3)), blocks.amax(dim=(1, 3))
        else:
            lo, hi = x.amin(dim=1, keepdim=True), x.amax(dim=1, keepdim=True)
        scale, zero = calculate_qparams(lo, hi, args)
        # the scale is stored in the weight's dtype: below its smallest normal (fp16: 6e-5) it would round to 0 and
        # the quantized weights to inf/NaN
        cast(torch.Tensor, lin.weight_scale).copy_(scale.clamp(min=torch.finfo(weight.dtype).tiny))
        if hasattr(lin, "weight_zero_point"):
            cast(torch.Tensor, lin.weight_zero_point).copy_(zero)
        lin.quantization_status = QuantizationStatus.FROZEN
        BaseCompressor.get_value_from_registry(CompressionFormat.float_quantized.value).compress_module(lin)
        state = lin.state_dict()
    return state["weight"].contiguous(), state["weight_scale"].to(weight.dtype).contiguous()


def dequantize_weight(weight, scale, block: Sequence[int] | None = None, dtype=None):
    """The float weight ``[out, in]`` of a float8 ``weight`` and its ``scale`` (per channel ``[out, 1]``, per tensor
    ``[]``/``[1]``, or per ``block`` ``[⌈out/bn⌉, ⌈in/bk⌉]``), in ``dtype`` (default: the scale's), through
    compressed-tensors' ``dequantize``. The strategy is passed, not left to the library to infer from the scale's
    shape (0.17 reads a block scale ``[2, 1]`` as per channel, and partial blocks as other block sizes); partial
    blocks are padded to whole blocks and cropped after (its decompressor does not pad on the way back)."""
    import torch
    from compressed_tensors.quantization import QuantizationArgs, QuantizationStrategy
    from compressed_tensors.quantization.lifecycle.forward import dequantize
    from compressed_tensors.quantization.utils import maybe_pad_tensor_for_block_quant

    dtype = dtype or scale.dtype
    out, inp = weight.shape
    if block:
        args = QuantizationArgs(
            num_bits=8, type="float", strategy=QuantizationStrategy.BLOCK, block_structure=list(block)
        )
        padded = maybe_pad_tensor_for_block_quant(weight.to(torch.float32), tuple(block))
        return dequantize(x_q=padded, scale=scale.to(torch.float32), args=args, dtype=torch.float32)[:out, :inp].to(
            dtype
        )
    per_channel = scale.dim() == 2 and tuple(scale.shape) == (out, 1)
    args = QuantizationArgs(
        num_bits=8,
        type="float",
        strategy=QuantizationStrategy.CHANNEL if per_channel else QuantizationStrategy.TENSOR,
    )
    return dequantize(x_q=weight, scale=scale, args=args, dtype=dtype)


def dequantize_tensors(d, tensors: dict) -> dict:
    """``tensors`` (canonical name -> torch tensor, :meth:`Drafter.load_all`) with every compressed-tensors FP8 weight
    of drafter ``d`` replaced by its dequantized value in the scale's dtype and the quantization parameters removed
    (``weight_scale``, ``input_scale``, KV-cache scales). Unquantized drafters come back unchanged.

    Activations run unquantized (static ``input_scale`` and KV-cache scales are dropped): the result is the
    weight-only (W8A16) view of the drafter, while vLLM also quantizes activations (per token or group of 128).

    Raises:
        EaglehubError: a quantization this cannot dequantize (no or a malformed config, another method, int or
            4-bit weights, config groups with different block sizes) or a float8 weight without its scale (exit 1).
    """
    from eaglehub.drafter.quant_config import read_quant_config

    qc = read_quant_config(d)
    quantized = [n for n, v in tensors.items() if n.endswith(".weight") and str(v.dtype) == "torch.float8_e4m3fn"]
    if qc is None and not quantized:
        return tensors
    blocks = {s.block for s in qc.targets.values()} if qc is not None and qc.checked else set()
    if qc is None or not qc.checked or any(s.kind != "fp8" for s in qc.targets.values()) or len(blocks) != 1:
        what = (
            "no quantization_config" if qc is None else qc.method if not qc.error else "a malformed quantization_config"
        )
        raise EaglehubError(
            f"drafter {d.path} is quantized ({what}); the reference engine dequantizes compressed-tensors FP8 only",
            hint="verify it with --engine vllm, or verify the unquantized source",
            exit_code=1,
        )
    block = blocks.pop()
    out = dict(tensors)
    for name in quantized:
        base = name.removesuffix(".weight")
        scale = out.pop(f"{base}.weight_scale", None)
        if scale is None:
            raise EaglehubError(
                f"{name} is float8 but {base}.weight_scale is missing",
                hint=f"run `eaglehub validate {d.path}`",
                exit_code=1,
            )
        out[name] = dequantize_weight(out[name], scale, block)
        out.pop(f"{base}.input_scale", None)
    for n in [n for n in out if n.endswith((".k_scale", ".v_scale"))]:
        out.pop(n)
    return out


def scheme_preset(name: str):
    """The compressed-tensors :class:`QuantizationScheme` of a CLI scheme name (targets ``["Linear"]``)."""
    from compressed_tensors.quantization import preset_name_to_scheme
    from loguru import logger

    # its partial-block warnings repeat per tensor on stderr; the report lists the layers concerned instead
    logger.disable("compressed_tensors")

    return preset_name_to_scheme(SCHEMES[name], ["Linear"])


#: CLI scheme name -> compressed-tensors preset
SCHEMES = {"fp8-dynamic": "FP8_DYNAMIC", "fp8-block": "FP8_BLOCK"}
