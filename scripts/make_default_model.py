"""Scripts torchvision's ResNet-18 (random weights, eval mode) to a file."""
import os
import sys

import torch
import torchvision

out = sys.argv[1] if len(sys.argv) > 1 else "models/resnet18.pt"
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
torch.manual_seed(0)
model = torchvision.models.resnet18(weights=None).eval()
tmp = out + ".tmp"
torch.jit.script(model).save(tmp)
os.replace(tmp, out)
print("wrote", out)
