#!/usr/bin/python3
"""Fixtures of the fp32 mutation suite (tests/verify/mutation_suite.cpp).

Usage: /usr/bin/python3 tests/verify/make_mutation_fixtures.py OUT_DIR

Writes OUT_DIR/resnet18_decoder.pt, OUT_DIR/resnet50_decoder.pt and
OUT_DIR/resnet18_illcond_decoder.pt (torch.jit.script) and
OUT_DIR/mutation_fixtures.json (input shapes).

Each is a torchvision ResNet (random weights, eval mode) with a decoder
branch on layer1's output: ConvTranspose2d(C, C, 2, stride 2) -> BatchNorm2d
-> ReLU, so that a transposed conv + BN fold is part of the model. C is
layer1's width (64, 256): in == out channels, so a fold on the wrong weight
axis still has the right shape and only the numerics can catch it. forward
returns (logits, decoder map).

BatchNorm statistics are randomized so that folding changes the weights:
gamma U(0.5, 1.5), beta N(0, 0.1), mean N(0, 0.1), var U(0.5, 1.5); channel
0 of every BatchNorm is a near-dead channel as trained networks have (var
1e-4, gamma 0.01), where leaving eps out of the fold matters.

resnet18_illcond is the ResNet-18 made ill-conditioned the way trained
networks can be: the last BatchNorm's shift gives every feature the
classifier reads a large common component (beta + 1000), and the classifier's
rows sum to zero, so each logit is a small difference of large sums. Its
fp32 run is ~1e-3 (relative L2) from its float64 run, about 1e4 times
float32's unit roundoff: a correct fold misses the fp32 criterion and must
pass by the float64 reference (verify/runner.h), and every mutation must
still fail.
"""

import json
import os
import sys

import torch
import torch.nn as nn
import torchvision


class WithDecoder(nn.Module):
    def __init__(self, net: nn.Module, width: int):
        super().__init__()
        self.net = net
        self.up = nn.ConvTranspose2d(width, width, 2, stride=2)
        self.up_bn = nn.BatchNorm2d(width)

    def forward(self, x):
        n = self.net
        x = n.maxpool(n.relu(n.bn1(n.conv1(x))))
        f1 = n.layer1(x)
        dec = torch.relu(self.up_bn(self.up(f1)))
        y = n.layer4(n.layer3(n.layer2(f1)))
        logits = n.fc(torch.flatten(n.avgpool(y), 1))
        return logits, dec


def randomize_bn(model: nn.Module) -> None:
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c) * 0.1)
                m.running_var.copy_(torch.empty(c).uniform_(0.5, 1.5))
                m.weight.copy_(torch.empty(c).uniform_(0.5, 1.5))
                m.bias.copy_(torch.randn(c) * 0.1)
                m.running_var[0] = 1e-4
                m.weight[0] = 0.01


def make_ill_conditioned(model: nn.Module) -> None:
    with torch.no_grad():
        model.net.layer4[-1].bn2.bias.add_(1000.0)
        fc = model.net.fc.weight
        fc.sub_(fc.mean(1, keepdim=True))


def make(name: str, width: int, shape, out_dir: str, ill_conditioned: bool = False) -> dict:
    torch.manual_seed(0)
    net = getattr(torchvision.models, name)()
    model = WithDecoder(net, width)
    randomize_bn(model)
    if ill_conditioned:
        make_ill_conditioned(model)
        name += "_illcond"
    model.eval()
    scripted = torch.jit.script(model)
    path = os.path.join(out_dir, name + "_decoder.pt")
    scripted.save(path + ".tmp")
    os.replace(path + ".tmp", path)
    with torch.no_grad():  # a sanity run, so a broken fixture fails here
        logits, dec = scripted(torch.randn(*shape))
    assert dec.shape[1] == width
    return {"name": name + "_decoder", "file": os.path.basename(path), "input_shape": list(shape)}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    entries = [
        make("resnet18", 64, (1, 3, 224, 224), out_dir),
        # ResNet-50 at a reduced input size keeps the suite cheap; every layer is there.
        make("resnet50", 256, (1, 3, 128, 128), out_dir),
        make("resnet18", 64, (1, 3, 224, 224), out_dir, ill_conditioned=True),
    ]
    with open(os.path.join(out_dir, "mutation_fixtures.json"), "w") as f:
        json.dump(entries, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
