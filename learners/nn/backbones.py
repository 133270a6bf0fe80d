"""Backbones: CNN4, ResNet-12 (optional DropBlock), ResNet-18 and WRN-28-10 feature extractors,
and two of Meta-Dataset's: `relationnet_cnn4` and `wrn16_2` (its `wide_resnet`).

Each backbone is the network without its last linear layer: `forward` returns one feature vector
per image (flattened maps for CNN4, global average pooling for the residual networks) and
`feature_map` the last spatial maps (used by the Relation Network module).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from learners import LearnerConfigError
from learners.nn.batch_norm import EpisodeBatchNorm2d

__all__ = [
    "Backbone",
    "BackboneConfig",
    "BACKBONES",
    "BasicBlock",
    "build_backbone",
    "canonical_backbone_name",
    "CNN4",
    "deeplab_align",
    "deeplab_aligned_size",
    "DropBlock",
    "INPUT_ALIGNMENTS",
    "RelationNetCNN4",
    "ResNet12",
    "ResNet12Block",
    "ResNet18",
    "SequentialBackbone",
    "WideBlock",
    "WideResNet",
]

BACKBONES = ("cnn4", "resnet12", "resnet18", "wrn28_10", "relationnet_cnn4", "wrn16_2")
_ALIASES = {
    "conv4": "cnn4",
    "resnet-12": "resnet12",
    "resnet-18": "resnet18",
    "wrn-28-10": "wrn28_10",
    "wrn": "wrn28_10",
    "relationnet_convnet": "relationnet_cnn4",
    "wrn-16-2": "wrn16_2",
}


@dataclass(frozen=True)
class BackboneConfig:
    """What to build: `name` in BACKBONES; `width` scales every channel count (1.25 gives the
    wider ResNet-12 of Lee et al.); `track_running_stats=False` makes BatchNorm always use batch
    statistics (what MAML-style learners need)."""

    name: str = "cnn4"
    image_size: int = 84
    width: float = 1.0
    dropblock: bool = False
    dropblock_rate: float = 0.1
    track_running_stats: bool = True
    input_alignment: str = "none"  # "deeplab": ResNet-18 resizes its input (deeplab_aligned_size)


# How ResNet-18 sizes its input: as given, or Meta-Dataset's DeepLab alignment.
INPUT_ALIGNMENTS = ("none", "deeplab")


def deeplab_aligned_size(size: int) -> int:
    """The side Meta-Dataset's ResNet-18 resizes an image of side `size` to before its first
    convolution: the next multiple of 32, plus one (the DeepLab feature-alignment rule;
    meta_dataset/models/functional_backbones.py `_resnet`, `deeplab_alignment=True` by default):
    42, 84, 126, 168, 224 -> 65, 97, 129, 193, 225."""
    return math.ceil(size / 32) * 32 + 1


def deeplab_align(images: torch.Tensor) -> torch.Tensor:
    """`images` (N, C, H, W, square) bilinearly resized to `deeplab_aligned_size`, corners
    aligned as TensorFlow's `resize_bilinear(..., align_corners=True)` does."""
    side = deeplab_aligned_size(int(images.shape[-1]))
    return F.interpolate(images, size=(side, side), mode="bilinear", align_corners=True)


def canonical_backbone_name(name: str) -> str:
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in BACKBONES:
        raise LearnerConfigError(f"unknown backbone {name!r}; expected one of {BACKBONES}")
    return key


def _scaled(channels: int, width: float) -> int:
    return max(1, int(round(channels * width)))


def _batch_norm(channels: int, track: bool) -> nn.BatchNorm2d:
    """BatchNorm that can also normalise with recorded support-set moments
    (`learners.nn.batch_norm`; a plain `nn.BatchNorm2d` otherwise)."""
    return EpisodeBatchNorm2d(channels, track_running_stats=track)


class Backbone(nn.Module):
    """Base: subclasses define `feature_map`; `forward` pools or flattens it."""

    flatten_features = False
    out_dim: int

    def feature_map(self, images: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        maps = self.feature_map(images)
        if self.flatten_features:
            return maps.flatten(1)
        return maps.mean(dim=(2, 3))

    def _set_out_dim(self, image_size: int) -> None:
        """Infer the feature size with a dry run (buffers are restored afterwards)."""
        saved = {name: buffer.clone() for name, buffer in self.named_buffers()}
        was_training = self.training
        self.eval()
        with torch.no_grad():
            probe = torch.zeros(2, 3, image_size, image_size)
            self.feature_channels = int(self.feature_map(probe).shape[1])
            self.out_dim = int(self.forward(probe).shape[1])
        self.train(was_training)
        for name, buffer in self.named_buffers():
            buffer.copy_(saved[name])


class SequentialBackbone(Backbone):
    """Base: the feature maps are the output of `blocks` applied in order (`blocks.i.*` in the
    state_dict), the one layout CNN4 and ResNet-12 share."""

    def __init__(self, blocks: list[nn.Module], image_size: int):
        super().__init__()
        self.blocks = nn.Sequential(*blocks)
        self._set_out_dim(image_size)

    def feature_map(self, images: torch.Tensor) -> torch.Tensor:
        return self.blocks(images)


def _conv_blocks(
    config: BackboneConfig, paddings: tuple[int, ...], pooled: tuple[bool, ...], bias: bool
) -> list[nn.Module]:
    """conv3x3(64 x width) - BatchNorm - ReLU [- max-pool 2] per block, in one flat list."""
    channels = _scaled(64, config.width)
    layers: list[nn.Module] = []
    in_channels = 3
    for padding, pool in zip(paddings, pooled):
        layers += [
            nn.Conv2d(in_channels, channels, 3, padding=padding, bias=bias),
            _batch_norm(channels, config.track_running_stats),
            nn.ReLU(),
        ]
        if pool:
            layers.append(nn.MaxPool2d(2))
        in_channels = channels
    return layers


class CNN4(SequentialBackbone):
    """Four blocks of conv3x3(64) - BatchNorm - ReLU - max-pool 2 (Vinyals et al.; Snell et al.)."""

    flatten_features = True

    def __init__(self, config: BackboneConfig):
        super().__init__(_conv_blocks(config, (1,) * 4, (True,) * 4, bias=True), config.image_size)


class RelationNetCNN4(SequentialBackbone):
    """Meta-Dataset's `relationnet_convnet` (functional_backbones.py): four conv3x3(64) - BN -
    ReLU blocks, unpadded and max-pooled in the first three, padded and not pooled in the last
    (so the maps stay 2x larger than CNN4's for the relation module)."""

    flatten_features = True

    def __init__(self, config: BackboneConfig):
        layers = _conv_blocks(config, (0, 0, 0, 1), (True, True, True, False), bias=False)
        super().__init__(layers, config.image_size)


class DropBlock(nn.Module):
    """DropBlock (Ghiasi et al., 2018): drop contiguous square regions of the feature maps."""

    def __init__(self, drop_rate: float, block_size: int):
        super().__init__()
        self.drop_rate = drop_rate
        self.block_size = block_size

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        if not self.training or self.drop_rate <= 0:
            return maps
        height, width = maps.shape[-2:]
        block = min(self.block_size, height, width)
        valid = (height - block + 1) * (width - block + 1)
        gamma = self.drop_rate / block**2 * (height * width) / valid
        seeds = torch.bernoulli(
            torch.full(
                (maps.shape[0], maps.shape[1], height - block + 1, width - block + 1),
                gamma,
                device=maps.device,
            )
        )
        pad = block - 1
        seeds = F.pad(seeds, (pad, pad, pad, pad))
        dropped = F.max_pool2d(seeds, kernel_size=block, stride=1)  # (B, C, height, width)
        keep = 1.0 - dropped
        return maps * keep * keep.numel() / keep.sum().clamp(min=1.0)


class ResNet12Block(nn.Module):
    """3 x (conv3x3 - BN - LeakyReLU 0.1) with a 1x1 shortcut, then max-pool 2 (Oreshkin et al.)."""

    def __init__(self, in_ch: int, out_ch: int, track: bool, dropblock: DropBlock | None):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv2d(c, out_ch, 3, padding=1, bias=False) for c in (in_ch, out_ch, out_ch)
        )
        self.norms = nn.ModuleList(_batch_norm(out_ch, track) for _ in range(3))
        self.shortcut = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 1, bias=False), _batch_norm(out_ch, track)
        )
        self.pool = nn.MaxPool2d(2)
        self.dropblock = dropblock

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x
        for index, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            out = norm(conv(out))
            if index < 2:
                out = F.leaky_relu(out, 0.1)
        out = self.pool(F.leaky_relu(out + self.shortcut(x), 0.1))
        return self.dropblock(out) if self.dropblock is not None else out


class ResNet12(SequentialBackbone):
    """ResNet-12 with channels 64-160-320-640; DropBlock (size 5) in the last two blocks."""

    def __init__(self, config: BackboneConfig):
        widths = [_scaled(c, config.width) for c in (64, 160, 320, 640)]
        blocks: list[nn.Module] = []
        in_ch = 3
        for index, out_ch in enumerate(widths):
            drop = None
            if config.dropblock and index >= 2:
                drop = DropBlock(config.dropblock_rate, block_size=5)
            blocks.append(ResNet12Block(in_ch, out_ch, config.track_running_stats, drop))
            in_ch = out_ch
        super().__init__(blocks, config.image_size)


class BasicBlock(nn.Module):
    """ResNet basic block: two conv3x3 - BN with identity or 1x1-projection shortcut."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, track: bool):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = _batch_norm(out_ch, track)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn2 = _batch_norm(out_ch, track)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), _batch_norm(out_ch, track)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(Backbone):
    """ResNet-18 (He et al.): 7x7 stem, max-pool, four stages of two basic blocks."""

    def __init__(self, config: BackboneConfig):
        super().__init__()
        track = config.track_running_stats
        widths = [_scaled(c, config.width) for c in (64, 128, 256, 512)]
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 7, stride=2, padding=3, bias=False),
            _batch_norm(widths[0], track),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages = []
        in_ch = widths[0]
        for index, out_ch in enumerate(widths):
            stride = 1 if index == 0 else 2
            stages += [
                BasicBlock(in_ch, out_ch, stride, track),
                BasicBlock(out_ch, out_ch, 1, track),
            ]
            in_ch = out_ch
        self.stages = nn.Sequential(*stages)
        self.deeplab_alignment = config.input_alignment == "deeplab"
        self._set_out_dim(config.image_size)

    def feature_map(self, images: torch.Tensor) -> torch.Tensor:
        if self.deeplab_alignment:
            images = deeplab_align(images)
        return self.stages(self.stem(images))


class WideBlock(nn.Module):
    """Pre-activation wide residual block (Zagoruyko & Komodakis): BN-ReLU-conv twice."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, track: bool):
        super().__init__()
        self.bn1 = _batch_norm(in_ch, track)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn2 = _batch_norm(out_ch, track)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.shortcut: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = F.relu(self.bn1(x))
        out = self.conv2(F.relu(self.bn2(self.conv1(pre))))
        return out + (self.shortcut(pre) if self.shortcut is not None else x)


class WideResNet(Backbone):
    """WRN-depth-k: conv3x3(16) then three groups of (depth-4)/6 wide blocks, strides 1, 2, 2."""

    def __init__(self, config: BackboneConfig, depth: int = 28, widen: int = 10):
        super().__init__()
        if (depth - 4) % 6:
            raise ValueError(f"WRN depth must be 6n+4, got {depth}")
        per_group = (depth - 4) // 6
        track = config.track_running_stats
        widths = [_scaled(c, config.width) for c in (16, 16 * widen, 32 * widen, 64 * widen)]
        self.stem = nn.Conv2d(3, widths[0], 3, padding=1, bias=False)
        blocks = []
        in_ch = widths[0]
        for group, out_ch in enumerate(widths[1:]):
            for index in range(per_group):
                stride = 2 if group > 0 and index == 0 else 1
                blocks.append(WideBlock(in_ch, out_ch, stride, track))
                in_ch = out_ch
        self.blocks = nn.Sequential(*blocks)
        self.final_norm = _batch_norm(in_ch, track)
        self._set_out_dim(config.image_size)

    def feature_map(self, images: torch.Tensor) -> torch.Tensor:
        return F.relu(self.final_norm(self.blocks(self.stem(images))))


def build_backbone(config: BackboneConfig) -> Backbone:
    """Construct the backbone named in `config` (see BACKBONES)."""
    name = canonical_backbone_name(config.name)
    if config.image_size < 16:
        raise LearnerConfigError(f"image_size must be >= 16 pixels, got {config.image_size}")
    if config.input_alignment != "none" and name != "resnet18":
        raise LearnerConfigError(
            f"--input-alignment {config.input_alignment} applies to --backbone resnet18 "
            f"(Meta-Dataset's ResNet-18), not {name}"
        )
    if name == "cnn4":
        return CNN4(config)
    if name == "resnet12":
        return ResNet12(config)
    if name == "resnet18":
        return ResNet18(config)
    if name == "relationnet_cnn4":
        return RelationNetCNN4(config)
    if name == "wrn16_2":  # Meta-Dataset's `wide_resnet` (_wide_resnet(..., n=2, k=2): 128-d)
        return WideResNet(config, depth=16, widen=2)
    return WideResNet(config, depth=28, widen=10)
