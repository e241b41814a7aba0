#!/usr/bin/python3
"""Models with inputs that have defaults, and input files that leave them out,
for tests/cli/optional_inputs_test.sh.

Usage: make_optional_inputs.py OUT_DIR

Writes (scripted with torch.jit.script, so the defaults are in the schema):
  optional_bias.pt  forward(x, bias: Optional[Tensor] = None): conv+bn+relu, + bias when given
  scaled.pt         forward(x, y, scale: int = 2, bias: Optional[Tensor] = None): fc(x) * scale + y (+ bias)
and torch.save'd inputs:
  ob_tuple1.pt      (x,)              a tuple shorter than optional_bias's inputs
  sc_tuple2.pt      (x, y)            a tuple shorter than scaled's inputs
  sc_dict_xy.pt     {"y": y, "x": x}  a dict without scale and bias
  sc_dict_xb.pt     {"x": x, "bias": b}  a dict without the required y
"""

import os
import sys
from typing import Optional

import torch
import torch.nn as nn


class OptionalBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x)))
        if bias is not None:
            y = y + bias
        return y


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor, scale: int = 2,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        out = self.fc(x) * scale + y
        if bias is not None:
            out = out + bias
        return out


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    ob = OptionalBias()
    with torch.no_grad():  # BN stats that make folding change the numbers
        ob.bn.running_mean.copy_(torch.randn(4) * 0.1)
        ob.bn.running_var.copy_(torch.empty(4).uniform_(0.5, 1.5))
        ob.bn.weight.copy_(torch.empty(4).uniform_(0.5, 1.5))
        ob.bn.bias.copy_(torch.randn(4) * 0.1)
    torch.jit.save(torch.jit.script(ob.eval()), os.path.join(out, "optional_bias.pt"))
    torch.jit.save(torch.jit.script(Scaled().eval()), os.path.join(out, "scaled.pt"))
    x, y, b = torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4)
    torch.save((torch.randn(1, 3, 16, 16),), os.path.join(out, "ob_tuple1.pt"))
    torch.save((x, y), os.path.join(out, "sc_tuple2.pt"))
    torch.save({"y": y, "x": x}, os.path.join(out, "sc_dict_xy.pt"))
    torch.save({"x": x, "bias": b}, os.path.join(out, "sc_dict_xb.pt"))


if __name__ == "__main__":
    main()
