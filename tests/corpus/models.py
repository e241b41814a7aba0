"""The real-model corpus: every torchvision classification and segmentation
builder, built with random weights (no downloads) in eval mode.

The list is enumerated from torchvision itself (`list_models`), not written
down here, so a newer torchvision brings its new models along. Each entry
knows its input shape: 1x3x64x64, or the model's documented minimum input size
(the weights' `min_size` meta, e.g. 75 for inception_v3, 224 for vit and
maxvit, whose sizes are fixed at construction) when that is larger. The
weights' metadata also gives the parameter count, used to order runs (small
first) and to skip giant models with --max-params; no weights are downloaded.
"""

import torch
import torchvision
from torchvision import models
from torchvision.models import segmentation

DEFAULT_SIZE = 64

# Builder arguments beyond weights=None. The large ViTs take image_size, so
# they run at a small size (the architecture is the same; only the position
# embedding is shorter). vit_b_16/vit_b_32 keep 224, the size users run.
EXTRA_KWARGS = {
    "vit_l_16": {"image_size": 64},
    "vit_l_32": {"image_size": 64},
    "vit_h_14": {"image_size": 56},
}


class Entry:
    def __init__(self, name, task, builder, kwargs, size, num_params):
        self.name = name
        self.task = task  # "classification" | "segmentation"
        self.builder = builder
        self.kwargs = kwargs
        self.size = size
        self.num_params = num_params

    @property
    def input_shape(self):
        return [1, 3, self.size, self.size]

    def build(self):
        torch.manual_seed(0)
        return self.builder(**self.kwargs).eval()

    def describe_kwargs(self):
        extra = {k: v for k, v in self.kwargs.items() if k not in ("weights", "weights_backbone")}
        return ", ".join("%s=%r" % kv for kv in sorted(extra.items()))


def _list(module):
    if hasattr(models, "list_models"):
        return models.list_models(module=module)
    raise RuntimeError("torchvision %s has no list_models (needs 0.14 or newer)" % torchvision.__version__)


def _weights_meta(name):
    try:
        enum = models.get_model_weights(name)
        return list(enum)[0].meta
    except Exception:  # noqa: BLE001  (a builder without published weights)
        return {}


def all_entries():
    """Every classification and segmentation model, smallest first."""
    entries = []
    for task, module in (("classification", models), ("segmentation", segmentation)):
        for name in _list(module):
            meta = _weights_meta(name)
            kwargs = {"weights": None}
            if task == "segmentation":
                kwargs["weights_backbone"] = None
            kwargs.update(EXTRA_KWARGS.get(name, {}))
            if "image_size" in kwargs:
                size = kwargs["image_size"]
            else:
                size = max(DEFAULT_SIZE, max(meta.get("min_size", (1, 1))))
            entries.append(Entry(name, task, models.get_model_builder(name), kwargs, size,
                                 int(meta.get("num_params", 0))))
    entries.sort(key=lambda e: (e.num_params, e.name))
    return entries


def script(model):
    return torch.jit.script(model)


def trace(model, shape):
    torch.manual_seed(1)
    x = torch.randn(shape)
    with torch.no_grad():
        # strict=False: segmentation models return a dict.
        return torch.jit.trace(model, x, strict=False, check_trace=False)
