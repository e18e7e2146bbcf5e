"""The image and video networks of the video experts, in plain torch.

Parameter names follow torchvision's state dicts, so a weights file saved from
``torchvision.models.resnet18/resnet50`` or ``torchvision.models.video.r2plus1d_18`` loads
into these modules unchanged:

- :class:`ResNet`: He et al., "Deep Residual Learning for Image Recognition" (CVPR 2016),
  with torchvision's "v1.5" bottleneck (the stride on the 3x3 convolution).
- :class:`R2Plus1D`: Tran et al., "A Closer Look at Spatiotemporal Convolutions for Action
  Recognition" (CVPR 2018): each 3x3x3 convolution factored into a 1x3x3 spatial one and a
  3x1x1 temporal one with ``floor(27 C_in C_out / (9 C_in + 3 C_out))`` channels between
  them (the paper's Eq. 1 parameter match, as torchvision computes it).

- :class:`VGGish`: Hershey et al., "CNN Architectures for Large-Scale Audio Classification"
  (ICASSP 2017), 128 values per 0.96 s log-mel patch, before the PCA/quantisation
  post-processing; parameter names follow ``harritaylor/torchvggish`` (``features.*``,
  ``embeddings.*``), so its ``vggish-10086976.pth`` loads.

``features(x)`` returns the pooled penultimate activations (512 or 2048 values), the
representation CE-style experts use; the classifier ``fc`` is kept only so weights files
load with ``strict=True``.
"""

from __future__ import annotations

import torch
from torch import nn


def _bn_relu(conv, channels, dims=2, relu=True):
    norm = nn.BatchNorm2d(channels) if dims == 2 else nn.BatchNorm3d(channels)
    return [conv, norm] + ([nn.ReLU(inplace=True)] if relu else [])


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + shortcut)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + shortcut)


class ResNet(nn.Module):
    """ImageNet ResNet; ``block`` is :class:`BasicBlock` (18/34) or :class:`Bottleneck`."""

    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._layer(block, 64, layers[0], 1)
        self.layer2 = self._layer(block, 128, layers[1], 2)
        self.layer3 = self._layer(block, 256, layers[2], 2)
        self.layer4 = self._layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dim = 512 * block.expansion
        self.fc = nn.Linear(self.dim, num_classes)
        _init(self)

    def _layer(self, block, planes, count, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )
        blocks = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        blocks += [block(self.inplanes, planes) for _ in range(1, count)]
        return nn.Sequential(*blocks)

    def features(self, x):
        """``(N, 3, H, W)`` normalised images -> ``(N, dim)`` pooled features."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.avgpool(x).flatten(1)

    def forward(self, x):
        return self.fc(self.features(x))


def resnet18():
    return ResNet(BasicBlock, [2, 2, 2, 2])


def resnet50():
    return ResNet(Bottleneck, [3, 4, 6, 3])


def _conv2plus1d(inplanes, planes, mid, stride=1):
    """A (2+1)D convolution as torchvision's ``Conv2Plus1D`` Sequential (indices 0..3)."""
    return nn.Sequential(
        nn.Conv3d(inplanes, mid, (1, 3, 3), (1, stride, stride), (0, 1, 1), bias=False),
        nn.BatchNorm3d(mid),
        nn.ReLU(inplace=True),
        nn.Conv3d(mid, planes, (3, 1, 1), (stride, 1, 1), (1, 0, 0), bias=False),
    )


class Block2Plus1D(nn.Module):
    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        mid = (inplanes * planes * 27) // (inplanes * 9 + 3 * planes)
        self.conv1 = nn.Sequential(
            _conv2plus1d(inplanes, planes, mid, stride), nn.BatchNorm3d(planes),
            nn.ReLU(inplace=True),
        )
        self.conv2 = nn.Sequential(_conv2plus1d(planes, planes, mid), nn.BatchNorm3d(planes))
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu(self.conv2(self.conv1(x)) + shortcut)


class R2Plus1D(nn.Module):
    """R(2+1)D-18 (Kinetics-400 classifier head); input ``(N, 3, T, H, W)``."""

    def __init__(self, layers=(2, 2, 2, 2), num_classes=400):
        super().__init__()
        self.stem = nn.Sequential(
            *_bn_relu(nn.Conv3d(3, 45, (1, 7, 7), (1, 2, 2), (0, 3, 3), bias=False), 45, 3),
            *_bn_relu(nn.Conv3d(45, 64, (3, 1, 1), 1, (1, 0, 0), bias=False), 64, 3),
        )
        self.inplanes = 64
        self.layer1 = self._layer(64, layers[0], 1)
        self.layer2 = self._layer(128, layers[1], 2)
        self.layer3 = self._layer(256, layers[2], 2)
        self.layer4 = self._layer(512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.dim = 512
        self.fc = nn.Linear(512, num_classes)
        _init(self)

    def _layer(self, planes, count, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv3d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm3d(planes)
            )
        blocks = [Block2Plus1D(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        blocks += [Block2Plus1D(planes, planes) for _ in range(1, count)]
        return nn.Sequential(*blocks)

    def features(self, x):
        x = self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))
        return self.avgpool(x).flatten(1)

    def forward(self, x):
        return self.fc(self.features(x))


def r2plus1d_18():
    return R2Plus1D()


def _init(model: nn.Module) -> None:
    """He initialisation of convolutions, unit BatchNorm (what ``@random`` weights get)."""
    for module in model.modules():
        if isinstance(module, (nn.Conv2d, nn.Conv3d)):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(module, (nn.BatchNorm2d, nn.BatchNorm3d)):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0, 0.01)
            nn.init.zeros_(module.bias)


class VGGish(nn.Module):
    """VGGish: four conv blocks (64, 128, 256x2, 512x2 channels, 3x3, max-pool 2) on a
    ``(N, 1, 96, 64)`` patch, then 4096-4096-128 fully connected layers (ReLU after each,
    as the released model)."""

    def __init__(self):
        super().__init__()
        layers: list[nn.Module] = []
        channels = 1
        for width in (64, "M", 128, "M", 256, 256, "M", 512, 512, "M"):
            if isinstance(width, int):
                layers += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(inplace=True)]
                channels = width
            else:  # "M"
                layers.append(nn.MaxPool2d(2, 2))
        self.features = nn.Sequential(*layers)
        self.embeddings = nn.Sequential(
            nn.Linear(512 * 4 * 6, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, 128), nn.ReLU(inplace=True),
        )
        self.dim = 128

    def features_of(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)  # (N, 512, 6, 4)
        x = x.permute(0, 2, 3, 1).reshape(len(x), -1)  # TF's NHWC flattening order
        return self.embeddings(x)

    def forward(self, x):
        return self.features_of(x)
