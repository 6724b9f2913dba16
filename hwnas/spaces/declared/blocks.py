"""The block types a declared space may use, by name, with their parameters (torch-free).

A block type declares its parameters (type, default, allowed values, whether the parameter may be
a search decision) and names its PyTorch implementation (``module:Class``, imported only when a
network is built). :data:`BLOCKS` is the registry the space language reads; adding a block type
is one :func:`register` call and one module class.

Elastic parameters (``elastic=True``) may be declared as ``{choices: [...]}``: the supernet holds
the largest variant and runs any smaller one by weight slicing (Once-for-All, Cai et al., ICLR
2020; AutoFormer, Chen et al., ICCV 2021).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hwnas.limits import MAX_CHANNELS, MAX_EXPAND, MAX_INPUT_SIDE, MAX_KERNEL
from hwnas.registry import Registry
from hwnas.spaces.base import make_divisible

ACTIVATIONS = ("relu", "relu6", "h_swish", "swish", "gelu", "none")
"""Activation names a block may use."""


@dataclass(frozen=True)
class Param:
    """One parameter of a block type.

    Attributes:
        type: int, float, str or bool.
        default: value when the file leaves it out (None: required).
        elastic: may be a search decision (``{choices: [...]}``).
        allowed: allowed values (None: any of the type).
        low: smallest allowed number.
        help: one line.
        scales: a width that a supernet's width multiplier scales (like channel counts).
        high: largest allowed number (:mod:`hwnas.limits`).
        odd: an odd number (a kernel: "same" padding keeps the feature map's size), or 0 where
            ``low`` is 0 (no such convolution).
    """

    type: type
    default: Any
    elastic: bool = False
    allowed: tuple[Any, ...] | None = None
    low: float | None = None
    help: str = ""
    scales: bool = False
    high: float | None = None
    odd: bool = False


@dataclass(frozen=True)
class BlockType:
    """A block the language knows.

    Attributes:
        name: registry name (``mbconv``).
        impl: ``module:Class`` of the PyTorch module.
        params: parameter name -> :class:`Param`.
        tokens_in: whether it takes tokens (B, N, E) rather than feature maps (B, C, H, W).
        tokens_out: whether it returns tokens.
        width_mixable: whether its output width can be mixed by channel masks (batch norm);
            False for layer-normalised blocks, whose width decisions are sampled one at a time.
        fixed_input: whether it needs one input size (learned position embeddings): no
            resolution decision in its space.
        pools: whether it returns one vector per image (global pooling over the feature map
            or the tokens): a network needs one before its classifier.
        ends: whether its output (B, E) is the classifier's alone: no block may follow it
            (``pool`` returns (B, C, 1, 1), which a 1x1 conv may still take).
        check: the block's own rule across parameters: (parameter -> the set of values it may
            take, strides the layer may have) -> None, or (parameter, what is wrong).
        summary: one line for the docs.
        keeps_width: whether its output has its input's width whatever ``out`` says (a pool,
            a transformer layer).
        out_hw: the feature map (H, W) it gives for an input map, its stride and its
            parameters' candidate values (parameter -> tuple, as the module is built with);
            None: each side ``ceil(side / stride)`` (a padded convolution). What the file's
            checks follow from the input to every ``min_side`` (a global pool gives 1x1).
        min_side: (parameter, the least input side the block takes) for its candidate values
            (a patch embedding: its patch); None: any side.
        size: the parameters and buffers of the module built for (c_in, c_out, stride,
            candidate values, input map), its largest candidate: what the file's bound on a
            network's size (:data:`hwnas.limits.MAX_PARAMETERS`) counts without building it;
            None: not counted.
    """

    name: str
    impl: str
    params: dict[str, Param] = field(default_factory=dict)
    tokens_in: bool = False
    tokens_out: bool = False
    width_mixable: bool = True
    fixed_input: bool = False
    pools: bool = False
    ends: bool = False
    check: Callable[[dict[str, set], set[int]], tuple[str, str] | None] | None = None
    summary: str = ""
    keeps_width: bool = False
    out_hw: Callable[[tuple[int, int], int, dict[str, tuple]], tuple[int, int]] | None = None
    min_side: Callable[[dict[str, tuple]], tuple[str, int]] | None = None
    size: Callable[[int, int, int, dict[str, tuple], tuple[int, int]], int] | None = None


BLOCKS: Registry[BlockType] = Registry("block type")
_MOD = "hwnas.spaces.declared.modules"


def register(block: BlockType) -> None:
    """Add ``block`` to :data:`BLOCKS` under its name."""
    BLOCKS.register(block.name, block)


def _check_mbconv(values: dict[str, set], strides: set[int]) -> tuple[str, str] | None:
    """Expansion 1 drops the expansion conv unless ``expand_at_1``: it cannot be one candidate
    of several (the supernet shares that conv)."""
    if 1.0 in values["expand"] and len(values["expand"]) > 1 and True not in values["expand_at_1"]:
        return "expand", "expand choices with 1 need expand_at_1: true"
    return None


def _check_uib(values: dict[str, set], strides: set[int]) -> tuple[str, str] | None:
    """A strided UIB strides its middle depthwise conv, or its start one when it has no middle
    one (the official definitions): the choices may not move the stride."""
    if max(strides) == 1:
        return None
    start, mid = values["start_kernel"], values["mid_kernel"]
    if 0 in mid and mid != {0}:
        return "mid_kernel", (
            "a strided uib layer cannot mix 'no middle depthwise' (0) with middle kernels: "
            "the stride moves between the two depthwise convs"
        )
    if mid == {0} and 0 in start:
        return "start_kernel", "a strided uib layer needs a depthwise conv"
    return None


def _conv(c_in: int, c_out: int, kernel: int, groups: int = 1, bias: bool = False) -> int:
    return c_in // groups * c_out * kernel * kernel + (c_out if bias else 0)


def _bn(channels: int) -> int:
    return 4 * channels + 1  # weight, bias, running mean and variance, batches tracked


def _conv_bn(c_in: int, c_out: int, kernel: int, groups: int = 1) -> int:
    return _conv(c_in, c_out, kernel, groups) + _bn(c_out)


def _linear(n_in: int, n_out: int) -> int:
    return n_in * n_out + n_out


def _mid(c_in: int, v: dict[str, tuple]) -> int:
    """The hidden width of an inverted bottleneck at its largest expansion."""
    return max(make_divisible(c_in * e, v["divisor"][0]) for e in v["expand"])


def _conv_size(c_in, c_out, stride, v, hw) -> int:
    bn = _bn(c_out) if v["bn"][0] else 0
    return _conv(c_in, c_out, max(v["kernel"]), bias=v["bias"][0]) + bn


def _mbconv_size(c_in, c_out, stride, v, hw) -> int:
    mid, groups, se = _mid(c_in, v), v["groups"][0], v["se"][0]
    expand = v["expand_at_1"][0] or any(e != 1 for e in v["expand"])
    n = _conv_bn(c_in, mid, 1, groups) if expand else 0
    n += _conv_bn(mid, mid, max(v["kernel"]), mid)
    if se > 0:
        s = make_divisible(mid * se, v["divisor"][0])
        n += _conv(mid, s, 1, bias=True) + _conv(s, mid, 1, bias=True)
    return n + _conv_bn(mid, c_out, 1, groups)


def _uib_size(c_in, c_out, stride, v, hw) -> int:
    mid, start, middle = _mid(c_in, v), max(v["start_kernel"]), max(v["mid_kernel"])
    n = _conv_bn(c_in, c_in, start, c_in) if start else 0
    n += _conv_bn(c_in, mid, 1) + (_conv_bn(mid, mid, middle, mid) if middle else 0)
    return n + _conv_bn(mid, c_out, 1)


def _fused_size(c_in, c_out, stride, v, hw) -> int:
    mid = _mid(c_in, v)
    return _conv_bn(c_in, mid, max(v["kernel"])) + _conv_bn(mid, c_out, 1)


def _skip_size(c_in, c_out, stride, v, hw) -> int:
    return 0 if stride == 1 and c_in == c_out else _conv_bn(c_in, c_out, 1)


def _patch_hw(hw: tuple[int, int], stride: int, v: dict[str, tuple]) -> tuple[int, int]:
    p = v["patch"][0]
    return (hw[0] // p, hw[1] // p)


def _patch_size(c_in, c_out, stride, v, hw) -> int:
    tokens = _patch_hw(hw, stride, v)
    return _conv(c_in, c_out, v["patch"][0], bias=True) + tokens[0] * tokens[1] * c_out


def _transformer_size(c_in, c_out, stride, v, hw) -> int:
    e, inner = c_in, max(v["heads"]) * v["head_dim"][0]
    hidden = max(max(1, int(round(e * r))) for r in v["mlp_ratio"])
    norms = 2 * 2 * e
    return (
        norms + 3 * _linear(e, inner) + _linear(inner, e) + _linear(e, hidden) + _linear(hidden, e)
    )


def _same_hw(hw: tuple[int, int], stride: int, v: dict[str, tuple]) -> tuple[int, int]:
    return hw


_ACT = Param(str, "relu", allowed=ACTIVATIONS, help="activation")
_KERNEL = Param(
    int, 3, elastic=True, low=1, high=MAX_KERNEL, odd=True, help="depthwise kernel size (odd)"
)
_EXPAND = dict(elastic=True, low=1, high=MAX_EXPAND, help="expansion ratio")
_DIVISOR = Param(
    int, 8, low=1, high=MAX_CHANNELS, help="hidden widths rounded to a multiple of this"
)

register(
    BlockType(
        "conv",
        f"{_MOD}:ConvBlock",
        {
            "kernel": Param(
                int, 1, elastic=True, low=1, high=MAX_KERNEL, odd=True, help="kernel size (odd)"
            ),
            "act": _ACT,
            "bn": Param(bool, True, help="batch norm after the convolution"),
            "bias": Param(bool, False, help="convolution bias"),
        },
        summary="convolution (+ batch norm) (+ activation)",
        size=_conv_size,
    )
)
register(
    BlockType(
        "mbconv",
        f"{_MOD}:MBConvBlock",
        {
            "kernel": _KERNEL,
            "expand": Param(float, 6.0, **_EXPAND),
            "act": _ACT,
            "se": Param(
                float, 0.0, low=0, high=1, help="squeeze-excite ratio of the hidden width (0: none)"
            ),
            "groups": Param(
                int, 1, low=1, high=MAX_CHANNELS, help="groups of the 1x1 convs (+ channel shuffle)"
            ),
            "divisor": _DIVISOR,
            "expand_at_1": Param(bool, False, help="keep the 1x1 expansion conv at ratio 1"),
        },
        check=_check_mbconv,
        size=_mbconv_size,
        summary="inverted residual / MBConv (MobileNetV2/V3, FBNet): 1x1 expand, kxk "
        "depthwise, optional squeeze-excite, 1x1 project, residual when shapes match",
    )
)
register(
    BlockType(
        "uib",
        f"{_MOD}:UIBBlock",
        {
            "start_kernel": Param(
                int,
                0,
                elastic=True,
                low=0,
                high=MAX_KERNEL,
                odd=True,
                help="start depthwise (0: none)",
            ),
            "mid_kernel": Param(
                int,
                3,
                elastic=True,
                low=0,
                high=MAX_KERNEL,
                odd=True,
                help="middle depthwise (0: none)",
            ),
            "expand": Param(float, 4.0, **_EXPAND),
            "act": _ACT,
            "divisor": _DIVISOR,
        },
        check=_check_uib,
        size=_uib_size,
        summary="Universal Inverted Bottleneck (MobileNetV4): ExtraDW (start+mid), IB (mid), "
        "ConvNext-like (start), FFN (neither)",
    )
)
register(
    BlockType(
        "fused_ib",
        f"{_MOD}:FusedIBBlock",
        {
            "kernel": Param(
                int, 3, elastic=True, low=1, high=MAX_KERNEL, odd=True, help="expansion conv kernel"
            ),
            "expand": Param(float, 4.0, **_EXPAND),
            "act": _ACT,
            "divisor": _DIVISOR,
        },
        summary="fused inverted bottleneck (EdgeResidual; MobileNetV4-M stem stage)",
        size=_fused_size,
    )
)
register(
    BlockType(
        "skip",
        f"{_MOD}:SkipBlock",
        {"act": Param(str, "relu", allowed=ACTIVATIONS, help="activation of the projection")},
        summary="identity; a 1x1 conv + BN + activation where width or stride change "
        "(HW-NAS-Bench's FBNet skip)",
        size=_skip_size,
    )
)
register(
    BlockType(
        "pool",
        f"{_MOD}:PoolBlock",
        pools=True,
        summary="global average pooling",
        keeps_width=True,
        out_hw=lambda hw, stride, v: (1, 1),
        size=lambda c_in, c_out, stride, v, hw: 0,
    )
)
register(
    BlockType(
        "patch_embed",
        f"{_MOD}:PatchEmbedBlock",
        {
            "patch": Param(
                int,
                4,
                low=1,
                high=MAX_INPUT_SIDE,
                help="patch side in pixels (conv kernel = stride)",
            )
        },
        tokens_out=True,
        width_mixable=False,
        fixed_input=True,
        summary="patch embedding: a patch x patch conv to the embedding width, flattened to "
        "tokens, plus learned position embeddings",
        out_hw=_patch_hw,
        min_side=lambda v: ("patch", max(v["patch"])),
        size=_patch_size,
    )
)
register(
    BlockType(
        "transformer",
        f"{_MOD}:TransformerBlock",
        {
            "heads": Param(int, 4, elastic=True, low=1, high=1024, help="attention heads"),
            "head_dim": Param(
                int, 64, low=1, high=MAX_CHANNELS, help="width of one head", scales=True
            ),
            "mlp_ratio": Param(
                float, 4.0, elastic=True, low=0.25, high=MAX_EXPAND, help="MLP hidden / width"
            ),
            "act": Param(str, "gelu", allowed=ACTIVATIONS, help="MLP activation"),
        },
        tokens_in=True,
        tokens_out=True,
        width_mixable=False,
        summary="pre-norm transformer encoder layer (multi-head self-attention + MLP)",
        keeps_width=True,
        out_hw=_same_hw,
        size=_transformer_size,
    )
)
register(
    BlockType(
        "token_pool",
        f"{_MOD}:TokenPoolBlock",
        tokens_in=True,
        pools=True,
        ends=True,
        width_mixable=False,
        summary="layer norm and mean over tokens",
        keeps_width=True,
        out_hw=_same_hw,
        size=lambda c_in, c_out, stride, v, hw: 2 * c_in,
    )
)
