"""torchvision's classification families as Loom's end-to-end tests build them.

One table, FAMILIES, shared by torchvision_forward.py (the inference export, BatchNorm folded
into Conv) and torchvision_training.py (3 optimizer steps, BatchNorm kept): each family is a
small variant (10 classes, small images, reduced width where the constructor has one) and
the image size its export uses. A family whose `refused` names an ONNX operator is one Loom
does not import yet: the forward test checks that the refusal names that operator, the
training test leaves the family out. When Loom learns the operator, deleting `refused=...`
from the family's line moves it into both tests.

Reduced beyond a constructor argument (so that they stay a few MFLOPs):

* alexnet: torchvision's AlexNet class with its layer sequence kept (kernel sizes, strides,
  pools, AdaptiveAvgPool2d((6, 6)), dropouts) but the five convolutions 8 to 16 channels
  wide instead of 64 to 384, and the two 4096-wide classifier layers 32 wide. The image is
  224 x 224, the smallest whose feature map is the 6 x 6 the pool expects (torch exports an
  adaptive pool only when the output divides the input).
* vgg: torchvision's VGG class on make_layers([8, "M", 16, "M"], batch_norm=True), a 28 x 28
  image so that the feature map is the 7 x 7 of its AdaptiveAvgPool2d((7, 7)), and the two
  4096-wide classifier layers 32 wide.
"""
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn as nn
import torchvision.models as M


class Family(NamedTuple):
    make: Callable[[], nn.Module]  # a fresh model, 10 classes
    size: int  # the image is size x size, 3 channels
    refused: Optional[str] = None  # the ONNX operator Loom does not import yet


def small_classifier(features, hidden, classes=10, dropout=0.5):
    """AlexNet's and VGG's classifier (Dropout, Linear, ReLU, Dropout, Linear, ReLU, Linear
    in their orders) with `hidden` instead of 4096."""
    return nn.Sequential(nn.Dropout(dropout), nn.Linear(features, hidden), nn.ReLU(True),
                         nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(True),
                         nn.Linear(hidden, classes))


def small_alexnet():
    model = M.AlexNet(num_classes=10)
    c = (8, 16, 16, 16, 16)
    model.features = nn.Sequential(
        nn.Conv2d(3, c[0], kernel_size=11, stride=4, padding=2), nn.ReLU(True),
        nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(c[0], c[1], kernel_size=5, padding=2), nn.ReLU(True),
        nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(c[1], c[2], kernel_size=3, padding=1), nn.ReLU(True),
        nn.Conv2d(c[2], c[3], kernel_size=3, padding=1), nn.ReLU(True),
        nn.Conv2d(c[3], c[4], kernel_size=3, padding=1), nn.ReLU(True),
        nn.MaxPool2d(kernel_size=3, stride=2))
    model.classifier = small_classifier(c[4] * 6 * 6, 32)
    return model


def small_vgg():
    model = M.vgg.VGG(M.vgg.make_layers([8, "M", 16, "M"], batch_norm=True), num_classes=10)
    model.classifier = small_classifier(16 * 7 * 7, 32)
    return model


FAMILIES = {
    "alexnet": Family(small_alexnet, 224),
    "vgg": Family(small_vgg, 28),
    "resnet18": Family(lambda: M.resnet18(num_classes=10), 64),
    "resnext": Family(lambda: M.resnet.ResNet(M.resnet.Bottleneck, [1, 1, 1, 1],
                                              num_classes=10, groups=4, width_per_group=8), 64),
    "wide_resnet": Family(lambda: M.resnet.ResNet(M.resnet.Bottleneck, [1, 1, 1, 1],
                                                  num_classes=10, width_per_group=128), 32),
    "mobilenet_v2": Family(lambda: M.mobilenet_v2(width_mult=0.25, num_classes=10), 64),
    "mobilenet_v3_small": Family(lambda: M.mobilenet_v3_small(num_classes=10), 64),
    "efficientnet_b0": Family(lambda: M.efficientnet_b0(num_classes=10), 64),
    "regnet_y_400mf": Family(lambda: M.regnet_y_400mf(num_classes=10), 64),
    "shufflenet_v2": Family(lambda: M.shufflenet_v2_x0_5(num_classes=10), 64),
    "squeezenet": Family(lambda: M.squeezenet1_1(num_classes=10), 64),
    "googlenet": Family(lambda: M.googlenet(num_classes=10, aux_logits=False,
                                            init_weights=True), 96),
    "mnasnet": Family(lambda: M.mnasnet0_5(num_classes=10), 64),
    "convnext": Family(lambda: M.convnext.ConvNeXt(
        [M.convnext.CNBlockConfig(16, 32, 1), M.convnext.CNBlockConfig(32, None, 1)],
        num_classes=10), 64),
    "vit": Family(lambda: M.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                              num_heads=2, hidden_dim=16, mlp_dim=32,
                                              num_classes=10), 32),
    "densenet": Family(lambda: M.densenet.DenseNet(8, (2, 2), 16, num_classes=10), 64),
    "inception_v3": Family(lambda: M.inception_v3(num_classes=10, aux_logits=False,
                                                  init_weights=True), 96),
    "swin": Family(lambda: M.swin_transformer.SwinTransformer(
        [2, 2], 16, [1, 1], [2, 2], [2, 2], num_classes=10), 32),
}


def build(family, seed=0, redraw_seed=1):
    """The family's model in eval() mode, built under `seed`, then redrawn (see redraw)."""
    torch.manual_seed(seed)
    model = family.make().eval()
    redraw(model, redraw_seed)
    return model


def redraw(model, seed):
    """Every float parameter redrawn: a normalization's weight (a 1-D `weight`) ~ 1 + N(0,
    0.2^2), any other ~ N(0, 2 / fan-in) (He's gain, which keeps the activations and the
    gradients of these deep ReLU networks from vanishing); running means ~ N(0, 0.2^2),
    variances ~ U(0.5, 1.5). So zero-initialised heads and unit statistics do not make a
    test trivially pass, and every parameter gets a gradient large enough to be checked."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                p.copy_(torch.randn(p.shape, generator=g) / max(fan_in, 1) ** 0.5)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.2)
            elif name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)


def image(size, batch=2, seed=2):
    """The batch of images: standard normal, [batch, 3, size, size]."""
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))
