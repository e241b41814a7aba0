#!/usr/bin/python3
"""-O1 against torch.jit.freeze on cases rebuilt from PyTorch's freezing tests.

Usage:
    /usr/bin/python3 tests/fusion/freezing_cases.py --ptopt build/tools/ptopt
        [--only REGEX] [--keep-dir DIR] [-v]

The cases follow the folding tests of PyTorch's test/jit/test_freezing.py
(conv+BN in 1d/2d/3d with and without bias and affine, BN without running
statistics, conv with add/sub/mul/div by constants of many shapes and dtypes,
Linear+BatchNorm1d, the conv->mul->add->BN chain) plus the cases of issue 24
(fixpoint chains, integer constants, training-mode modules). Each module is
built here with torch.jit.script or torch.jit.trace, its BatchNorm statistics
and gamma/beta randomized (seeded per case) so that a wrong folding formula
shows in the numbers, and saved. Then

    ptopt IN.pt OUT.pt -O1 --input-shape ... --report R.json

runs on it, and the case checks:
  * the exit code (0);
  * OUT.pt reloads in stock PyTorch and matches the module in eval mode:
    max|a-b| <= 1e-4 * max|ref| + 1e-5 on seeded inputs;
  * the ops left in OUT.pt's (inlined) graph: `want` gives the exact count of
    each op group the case is about (0 = folded away; a must-not-fold case,
    named `..._must_not_fold`, asserts its op is kept);
  * torch.jit.freeze of the same file: for cases that must fold, ptopt leaves
    no more of those ops than freeze does (freeze refuses training-mode
    modules; the table says so);
  * the notes ptopt prints name the real reason: "traced" + "training" for a
    trace made in training mode, "script" + "training" for a scripted module
    saved in training mode, "running statistics" (and no training-mode note)
    for BatchNorm with track_running_stats=False; eval-mode modules get no
    training-mode note;
  * integer constants without an exact float value: the fold declines and
    `--explain` says why ("exact" or "represent");
  * training-mode cases: the report has a "mode" object that says "train",
    and `--keep-training` refuses the file (exit 2, nothing written); some
    eval-mode cases run `--keep-training` as the control (exit 0, written).

A table (case, expectation, ops left by ptopt and by freeze, max error) is
printed; the exit status is 1 when any check failed, with the failures listed.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import zlib

import torch
import torch.nn as nn

# ---------------------------------------------------------------------------
# Op groups counted in a graph. Arithmetic counts only nodes with a Tensor
# result (integer arithmetic on sizes is not what a fold removes).

OP_GROUPS = {
    "bn": {"aten::batch_norm", "aten::_batch_norm_impl_index", "aten::native_batch_norm"},
    "add": {"aten::add", "aten::add_"},
    "sub": {"aten::sub", "aten::sub_", "aten::rsub"},
    "mul": {"aten::mul", "aten::mul_"},
    "div": {"aten::div", "aten::div_"},
    "dropout": {"aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::feature_dropout_",
                "aten::alpha_dropout", "aten::alpha_dropout_", "aten::feature_alpha_dropout",
                "aten::feature_alpha_dropout_"},
    "conv": {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d",
             "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::_convolution", "aten::convolution"},
    "linear": {"aten::linear", "aten::addmm"},
}
TENSOR_ONLY = {"add", "sub", "mul", "div"}
# Groups that are structure (the conv/linear that absorbs the fold), not
# something freeze is compared on.
STRUCTURAL = {"conv", "linear"}
KIND_TO_GROUP = {k: g for g, kinds in OP_GROUPS.items() for k in kinds}
SELF = os.path.abspath(__file__)


def count_ops(graph):
    counts = {g: 0 for g in OP_GROUPS}

    def walk(block):
        for node in block.nodes():
            group = KIND_TO_GROUP.get(node.kind())
            if group is not None:
                outs = list(node.outputs())
                if group not in TENSOR_ONLY or (outs and isinstance(outs[0].type(), torch._C.TensorType)):
                    counts[group] += 1
            for sub in node.blocks():
                walk(sub)

    walk(graph)
    return counts


def fmt_counts(counts, keys):
    if counts is None:
        return "-"
    return " ".join("%s=%d" % (k, counts[k]) for k in keys)


# ---------------------------------------------------------------------------
# Modules. Plain tensor attributes (not buffers), as in PyTorch's tests: the
# script makes them module attributes, the trace records them as constants.

C = 8  # conv output channels


class ConvBN(nn.Module):
    def __init__(self, conv, bn):
        super().__init__()
        self.conv = conv
        self.bn = bn

    def forward(self, x):
        return self.bn(self.conv(x))


class ConvOpRight(nn.Module):
    """op(conv(x), c) with a tensor constant c."""

    def __init__(self, conv, op, c):
        super().__init__()
        self.conv = conv
        self.op = op
        self.c = c

    def forward(self, x):
        return self.op(self.conv(x), self.c)


class ConvOpLeft(nn.Module):
    """op(c, conv(x)) with a tensor constant c."""

    def __init__(self, conv, op, c):
        super().__init__()
        self.conv = conv
        self.op = op
        self.c = c

    def forward(self, x):
        return self.op(self.c, self.conv(x))


class ConvOpScalar(nn.Module):
    """op(conv(x), s) with a Python float s."""

    def __init__(self, conv, op, s: float):
        super().__init__()
        self.conv = conv
        self.op = op
        self.s = s

    def forward(self, x):
        return self.op(self.conv(x), self.s)


class ConvAddReused(nn.Module):
    """conv(x) + c, and conv(x) itself is a second output."""

    def __init__(self, conv, c):
        super().__init__()
        self.conv = conv
        self.c = c

    def forward(self, x):
        y = self.conv(x)
        return y + self.c, y


class ConvAddInput(nn.Module):
    """conv(x) + z with z a model input (not a constant)."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x, z):
        return self.conv(x) + z


class ConvMulAddBN(nn.Module):
    """PyTorch's test_conv_mul_add_bn: a 0-dim float and a 0-dim int64."""

    def __init__(self, conv, bn):
        super().__init__()
        self.conv = conv
        self.bn = bn
        self.t1 = torch.tensor(2.2)
        self.t2 = torch.tensor(2)

    def forward(self, x):
        return self.bn(torch.add(torch.mul(self.conv(x), self.t1), self.t2))


class ConvBNMulBN(nn.Module):
    def __init__(self, conv, bn1, c, bn2):
        super().__init__()
        self.conv = conv
        self.bn1 = bn1
        self.c = c
        self.bn2 = bn2

    def forward(self, x):
        return self.bn2(self.bn1(self.conv(x)) * self.c)


class LinearAddBN(nn.Module):
    def __init__(self, linear, c, bn):
        super().__init__()
        self.linear = linear
        self.c = c
        self.bn = bn

    def forward(self, x):
        return self.bn(self.linear(x) + self.c)


class LinearBN(nn.Module):
    def __init__(self, linear, bn):
        super().__init__()
        self.linear = linear
        self.bn = bn

    def forward(self, x):
        return self.bn(self.linear(x))


class ConvDropBN(nn.Module):
    def __init__(self, conv, drop, bn):
        super().__init__()
        self.conv = conv
        self.drop = drop
        self.bn = bn

    def forward(self, x):
        return self.bn(self.drop(self.conv(x)))


class LinearDropBN(nn.Module):
    def __init__(self, linear, drop, bn):
        super().__init__()
        self.linear = linear
        self.drop = drop
        self.bn = bn

    def forward(self, x):
        return self.bn(self.drop(self.linear(x)))


class ConvDrop(nn.Module):
    def __init__(self, conv, drop):
        super().__init__()
        self.conv = conv
        self.drop = drop

    def forward(self, x):
        return self.drop(self.conv(x))


def conv(dim, bias=True, cin=3, cout=C, groups=1):
    cls = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dim]
    return cls(cin, cout, kernel_size=3, padding=1, bias=bias, groups=groups)


def conv_t(dim, bias=True):
    cls = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}[dim]
    return cls(3, C, kernel_size=3, stride=2, padding=1, output_padding=1, bias=bias)


def bn(dim, n=C, affine=True, stats=True):
    cls = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dim]
    return cls(n, eps=1e-3, affine=affine, track_running_stats=stats)


def shape(dim, n=2, cin=3, s=None):
    spatial = {1: [10], 2: [6, 6], 3: [4, 4, 4]}[dim] if s is None else [s] * dim
    return [n, cin] + spatial


def per_channel(dim, n=C):
    return [1, n] + [1] * dim


def randomize(module):
    """Random BN statistics and gamma/beta, so a wrong formula shows."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                if m.running_mean is not None:
                    m.running_mean.normal_(0.0, 0.5)
                    m.running_var.uniform_(0.3, 2.0)
                if m.affine:
                    m.weight.uniform_(-1.5, 1.5)
                    m.bias.normal_(0.0, 0.5)


# ---------------------------------------------------------------------------
# Cases.


class Case:
    def __init__(self, name, make, shapes, want, how="script", must_not_fold=False, train=False,
                 note=None, keep_training=None, explain=None):
        self.name = name
        self.make = make              # () -> eager nn.Module (in train mode, as built)
        self.shapes = shapes          # one input shape per model input
        self.want = want              # op group -> exact count left by ptopt
        self.how = how                # "script" or "trace"
        self.must_not_fold = must_not_fold
        self.train = train            # saved in training mode
        self.note = note              # None, "traced", "scripted", "running-stats"
        self.keep_training = keep_training  # None, or the expected exit code of --keep-training
        self.explain = explain        # regex that `--explain` output must match (why a fold declined)

    @property
    def expectation(self):
        e = "KEEP (must not fold)" if self.must_not_fold else "fold"
        if self.train:
            e += ", train mode"
        return e


def both(name, make, shapes, want, **kw):
    """The case scripted and traced."""
    return [Case(name + "_script", make, shapes, want, how="script", **kw),
            Case(name + "_trace", make, shapes, want, how="trace", **kw)]


# What a decline for an integer constant without an exact float says.
EXACT = r"exact|represent"


def build_cases():
    cases = []
    add = cases.extend

    # conv + BN (test_conv_bn_folding): 1d/2d/3d, bias or not, script/trace.
    for dim in (1, 2, 3):
        for bias in (True, False):
            add(both("conv%dd_%s_bn" % (dim, "bias" if bias else "nobias"),
                     lambda dim=dim, bias=bias: ConvBN(conv(dim, bias), bn(dim)),
                     [shape(dim)], {"bn": 0, "conv": 1}))
    add([Case("conv2d_bn_noaffine_script", lambda: ConvBN(conv(2), bn(2, affine=False)),
              [shape(2)], {"bn": 0, "conv": 1}),
         Case("conv1d_bn_noaffine_trace", lambda: ConvBN(conv(1, False), bn(1, affine=False)),
              [shape(1)], {"bn": 0, "conv": 1}, how="trace"),
         Case("conv2d_depthwise_bn_script", lambda: ConvBN(conv(2, cin=C, groups=C), bn(2)),
              [shape(2, cin=C)], {"bn": 0, "conv": 1})])
    # ConvTranspose + BN (freeze leaves these).
    add([Case("convT2d_bn_script", lambda: ConvBN(conv_t(2), bn(2)), [shape(2)], {"bn": 0, "conv": 1}),
         Case("convT2d_nobias_bn_trace", lambda: ConvBN(conv_t(2, False), bn(2)), [shape(2)],
              {"bn": 0, "conv": 1}, how="trace"),
         Case("convT1d_bn_script", lambda: ConvBN(conv_t(1), bn(1)), [shape(1)], {"bn": 0, "conv": 1}),
         Case("convT3d_bn_trace", lambda: ConvBN(conv_t(3), bn(3)), [shape(3)], {"bn": 0, "conv": 1},
              how="trace")])

    # BN without running statistics normalizes by batch statistics: kept.
    add([Case("conv2d_bn_no_running_stats_script_must_not_fold", lambda: ConvBN(conv(2), bn(2, stats=False)),
              [shape(2)], {"bn": 1}, must_not_fold=True, note="running-stats", keep_training=0),
         Case("conv2d_bn_no_running_stats_trace_must_not_fold", lambda: ConvBN(conv(2), bn(2, stats=False)),
              [shape(2)], {"bn": 1}, how="trace", must_not_fold=True, note="running-stats", keep_training=0),
         Case("conv1d_bn_no_running_stats_script_must_not_fold",
              lambda: ConvBN(conv(1, False), bn(1, stats=False)),
              [shape(1)], {"bn": 1}, must_not_fold=True, note="running-stats"),
         Case("linear_bn1d_no_running_stats_script_must_not_fold",
              lambda: LinearBN(nn.Linear(6, C), bn(1, stats=False)),
              [[4, 6]], {"bn": 1}, must_not_fold=True, note="running-stats")])

    # conv op constant (test_conv_add_folding): per-channel [1,C,1,1], script and trace.
    ops = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
    for name, op in ops.items():
        add(both("conv2d_%s_perchannel" % name,
                 lambda op=op: ConvOpRight(conv(2), op, torch.rand(per_channel(2)) + 0.5),
                 [shape(2)], {name: 0, "conv": 1}))
    # Python float scalar, conv1d (bias and not).
    for name, op in ops.items():
        cases.append(Case("conv1d_%s_scalar_script" % name,
                          lambda op=op: ConvOpScalar(conv(1, bias=(op is not torch.mul)), op, 2.0),
                          [shape(1)], {name: 0, "conv": 1}))
    add([Case("conv3d_mul_perchannel_trace", lambda: ConvOpRight(conv(3), torch.mul, torch.rand(per_channel(3)) + 0.5),
              [shape(3)], {"mul": 0, "conv": 1}, how="trace"),
         Case("conv3d_nobias_add_perchannel_script",
              lambda: ConvOpRight(conv(3, False), torch.add, torch.rand(per_channel(3))),
              [shape(3)], {"add": 0, "conv": 1}),
         Case("conv2d_add_0dim_script", lambda: ConvOpRight(conv(2), torch.add, torch.tensor(0.7)),
              [shape(2)], {"add": 0, "conv": 1}),
         Case("conv2d_mul_0dim_trace", lambda: ConvOpRight(conv(2), torch.mul, torch.tensor(-1.3)),
              [shape(2)], {"mul": 0, "conv": 1}, how="trace"),
         Case("conv2d_div_shape1_script", lambda: ConvOpRight(conv(2), torch.div, torch.tensor([1.7])),
              [shape(2)], {"div": 0, "conv": 1}),
         Case("conv2d_add_Cx1x1_script", lambda: ConvOpRight(conv(2), torch.add, torch.rand(C, 1, 1)),
              [shape(2)], {"add": 0, "conv": 1}),
         Case("conv2d_mul_Cx1x1_trace", lambda: ConvOpRight(conv(2), torch.mul, torch.rand(C, 1, 1) + 0.5),
              [shape(2)], {"mul": 0, "conv": 1}, how="trace"),
         # PyTorch's "broadcasting add" with a [1, 1] tensor folds.
         Case("conv2d_sub_1x1_script", lambda: ConvOpRight(conv(2), torch.sub, torch.rand(1, 1)),
              [shape(2)], {"sub": 0, "conv": 1}),
         # Constant on the left (freeze folds only conv-on-the-left).
         Case("conv2d_const_plus_conv_script", lambda: ConvOpLeft(conv(2), torch.add, torch.rand(per_channel(2))),
              [shape(2)], {"add": 0, "conv": 1}),
         Case("conv2d_const_times_conv_trace",
              lambda: ConvOpLeft(conv(2), torch.mul, torch.rand(per_channel(2)) + 0.5),
              [shape(2)], {"mul": 0, "conv": 1}, how="trace")])

    # conv op constant that must NOT fold.
    add([Case("conv2d_add_1x1xHxW_must_not_fold", lambda: ConvOpRight(conv(2), torch.add, torch.rand(1, 1, 6, 6)),
              [shape(2)], {"add": 1}, must_not_fold=True),
         Case("conv2d_mul_1x1xHxW_trace_must_not_fold",
              lambda: ConvOpRight(conv(2), torch.mul, torch.rand(1, 1, 6, 6)),
              [shape(2)], {"mul": 1}, how="trace", must_not_fold=True),
         # A [C] tensor aligns with W (trailing dims), not with channels (here W == C).
         Case("conv2d_add_trailing_C_aligns_W_must_not_fold",
              lambda: ConvOpRight(conv(2), torch.add, torch.rand(C)),
              [shape(2, s=C)], {"add": 1}, must_not_fold=True),
         # PyTorch's [C, 1, W] case: widens a size-1 spatial dim of the output.
         Case("conv2d_mul_widens_W_must_not_fold",
              lambda: ConvOpRight(nn.Conv2d(3, C, kernel_size=(3, 6)), torch.mul, torch.rand(C, 1, 5)),
              [shape(2)], {"mul": 1}, must_not_fold=True),
         # Widens the rank: [2, 1, C, 1, 1] on a 4-D output.
         Case("conv2d_add_widens_rank_must_not_fold",
              lambda: ConvOpRight(conv(2), torch.add, torch.rand(2, 1, C, 1, 1)),
              [shape(2)], {"add": 1}, must_not_fold=True),
         # Widens the batch: [2, C, 1, 1] on a batch of 1.
         Case("conv2d_sub_widens_batch_must_not_fold",
              lambda: ConvOpRight(conv(2), torch.sub, torch.rand(2, C, 1, 1)),
              [shape(2, n=1)], {"sub": 1}, must_not_fold=True),
         # c / conv(x) is not affine in conv(x).
         Case("conv2d_const_div_by_conv_must_not_fold",
              lambda: ConvOpLeft(conv(2), torch.div, torch.rand(per_channel(2)) + 0.5),
              [shape(2)], {"div": 1}, must_not_fold=True),
         # The conv's output is also a model output.
         Case("conv2d_add_conv_output_reused_must_not_fold",
              lambda: ConvAddReused(conv(2), torch.rand(per_channel(2))),
              [shape(2)], {"add": 1}, must_not_fold=True),
         # The addend is a model input.
         Case("conv2d_add_input_must_not_fold", lambda: ConvAddInput(conv(2)),
              [shape(2), per_channel(2)], {"add": 1}, must_not_fold=True)])

    # Integer and bool constants: fold when every value is exact in fp32.
    add([Case("conv2d_add_int32_shape1_script", lambda: ConvOpRight(conv(2), torch.add, torch.tensor([2], dtype=torch.int32)),
              [shape(2)], {"add": 0, "conv": 1}),
         Case("conv2d_mul_int32_shape1_script", lambda: ConvOpRight(conv(2), torch.mul, torch.tensor([3], dtype=torch.int32)),
              [shape(2)], {"mul": 0, "conv": 1}),
         Case("conv2d_div_int32_shape1_trace", lambda: ConvOpRight(conv(2), torch.div, torch.tensor([2], dtype=torch.int32)),
              [shape(2)], {"div": 0, "conv": 1}, how="trace"),
         Case("conv2d_add_int64_0dim_script", lambda: ConvOpRight(conv(2), torch.add, torch.tensor(5)),
              [shape(2)], {"add": 0, "conv": 1}),
         Case("conv2d_mul_int64_perchannel_script",
              lambda: ConvOpRight(conv(2), torch.mul, torch.arange(1, C + 1).reshape(per_channel(2))),
              [shape(2)], {"mul": 0, "conv": 1}),
         Case("conv1d_sub_int32_perchannel_trace",
              lambda: ConvOpRight(conv(1), torch.sub, torch.arange(-4, C - 4, dtype=torch.int32).reshape(per_channel(1))),
              [shape(1)], {"sub": 0, "conv": 1}, how="trace"),
         Case("conv2d_mul_bool_perchannel_script",
              lambda: ConvOpRight(conv(2), torch.mul, (torch.arange(C) % 3 != 0).reshape(per_channel(2))),
              [shape(2)], {"mul": 0, "conv": 1}),
         Case("conv2d_add_bool_shape1_script", lambda: ConvOpRight(conv(2), torch.add, torch.tensor([True])),
              [shape(2)], {"add": 0, "conv": 1}),
         # 2**24 + 1 has no float32: the fold would change the constant.
         Case("conv2d_mul_int64_not_exact_in_fp32_must_not_fold",
              lambda: ConvOpRight(conv(2), torch.mul, torch.tensor([2 ** 24 + 1])),
              [shape(2)], {"mul": 1}, must_not_fold=True, explain=EXACT),
         Case("conv2d_add_int32_perchannel_one_not_exact_must_not_fold",
              lambda: ConvOpRight(conv(2), torch.add,
                                  torch.tensor([1, 2, 3, 2 ** 24 + 1, 4, 5, 6, 7], dtype=torch.int32).reshape(per_channel(2))),
              [shape(2)], {"add": 1}, must_not_fold=True, explain=EXACT)])

    # Linear + BatchNorm1d.
    add(both("linear_bn1d_2d_input", lambda: LinearBN(nn.Linear(6, C), bn(1)), [[4, 6]], {"bn": 0, "linear": 1}))
    add([Case("linear_nobias_bn1d_2d_input_script", lambda: LinearBN(nn.Linear(6, C, bias=False), bn(1)),
              [[4, 6]], {"bn": 0, "linear": 1}),
         # 3-D input: BN1d normalizes dim 1, the linear's features are dim 2
         # (test_bn_not_broadcast_with_linear) ...
         Case("linear_bn1d_3d_input_features_differ_must_not_fold",
              lambda: LinearBN(nn.Linear(3, 2), bn(1, n=4)), [[3, 4, 3]], {"bn": 1}, must_not_fold=True),
         # ... and with out_features == num_features the shapes fit, the fold would still be wrong.
         Case("linear_bn1d_3d_input_same_size_script_must_not_fold",
              lambda: LinearBN(nn.Linear(5, 4), bn(1, n=4)), [[3, 4, 5]], {"bn": 1}, must_not_fold=True),
         Case("linear_bn1d_3d_input_same_size_trace_must_not_fold",
              lambda: LinearBN(nn.Linear(4, 4), bn(1, n=4)), [[3, 4, 4]], {"bn": 1}, how="trace",
              must_not_fold=True)])

    # Chains that need the folds to repeat.
    add(both("conv2d_mul_add_bn_chain", lambda: ConvMulAddBN(conv(2), bn(2)), [shape(2)],
             {"bn": 0, "mul": 0, "add": 0, "conv": 1}))
    add(both("conv2d_bn_mul_bn_chain",
             lambda: ConvBNMulBN(conv(2), bn(2), torch.rand(per_channel(2)) + 0.5, bn(2)), [shape(2)],
             {"bn": 0, "mul": 0, "conv": 1}))
    add(both("linear_add_bn1d_chain", lambda: LinearAddBN(nn.Linear(6, C), torch.randn(C), bn(1)), [[4, 6]],
             {"bn": 0, "add": 0, "linear": 1}))
    add([Case("conv2d_dropout_bn_script", lambda: ConvDropBN(conv(2), nn.Dropout(0.3), bn(2)), [shape(2)],
              {"bn": 0, "dropout": 0, "conv": 1}),
         Case("conv2d_dropout2d_script", lambda: ConvDrop(conv(2), nn.Dropout2d(0.5)), [shape(2)],
              {"dropout": 0, "conv": 1})])

    # Training-mode modules: ptopt gives the model's eval semantics and says so.
    add([Case("train_scripted_conv2d_dropout_bn", lambda: ConvDropBN(conv(2), nn.Dropout(0.5), bn(2)),
              [shape(2)], {"bn": 0, "dropout": 0, "conv": 1}, train=True, note="scripted", keep_training=2),
         Case("train_scripted_linear_dropout_bn1d", lambda: LinearDropBN(nn.Linear(6, C), nn.Dropout(0.5), bn(1)),
              [[4, 6]], {"bn": 0, "dropout": 0, "linear": 1}, train=True, note="scripted", keep_training=2),
         Case("train_traced_conv2d_bn", lambda: ConvBN(conv(2), bn(2)), [shape(2)], {"bn": 0, "conv": 1},
              how="trace", train=True, note="traced", keep_training=2),
         Case("train_traced_conv2d_dropout_bn", lambda: ConvDropBN(conv(2), nn.Dropout(0.5), bn(2)), [shape(2)],
              {"bn": 0, "dropout": 0, "conv": 1}, how="trace", train=True, note="traced", keep_training=2),
         Case("train_traced_conv2d_dropout2d", lambda: ConvDrop(conv(2), nn.Dropout2d(0.5)), [shape(2)],
              {"dropout": 0, "conv": 1}, how="trace", train=True, note="traced", keep_training=2)])

    # Eval-mode controls for --keep-training (it must not refuse these).
    for c in cases:
        if c.name in ("conv2d_bias_bn_script", "conv2d_bias_bn_trace"):
            c.keep_training = 0
    return cases


# ---------------------------------------------------------------------------
# Running one case.


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o)]
    raise TypeError("unexpected output type %r" % type(out))


def max_error(got, ref):
    """(max abs error, allowed) over all outputs; allowed = 1e-4*max|ref| + 1e-5."""
    got, ref = flatten(got), flatten(ref)
    if len(got) != len(ref):
        raise AssertionError("%d outputs, expected %d" % (len(got), len(ref)))
    err, allowed = 0.0, 0.0
    for g, r in zip(got, ref):
        if g.shape != r.shape or g.dtype != r.dtype:
            raise AssertionError("output %s %s, expected %s %s" % (tuple(g.shape), g.dtype, tuple(r.shape), r.dtype))
        err = max(err, (g.double() - r.double()).abs().max().item())
        allowed = max(allowed, 1e-4 * r.double().abs().max().item() + 1e-5)
    return err, allowed


def build_module(case, path):
    """Makes, randomizes and saves the module; returns the eval-mode reference."""
    torch.manual_seed(zlib.crc32(case.name.encode()) & 0x7FFFFFFF)
    eager = case.make()
    randomize(eager)
    eager.train(case.train)
    example = [torch.randn(s) for s in case.shapes]
    with torch.no_grad():
        if case.how == "script":
            m = torch.jit.script(eager)
        else:
            # One forward only (no check run): a training-mode trace updates
            # the BN statistics, and the saved file has the updated ones.
            m = torch.jit.trace(eager, tuple(example) if len(example) > 1 else example[0], check_trace=False)
    m.train(case.train)
    torch.jit.save(m, path)
    # The reference: the same weights and statistics, in eval mode.
    eager.load_state_dict(torch.jit.load(path).state_dict())
    return eager.eval()


def first_line(text):
    return next((l.strip() for l in text.splitlines() if l.strip()), "")


def run_ptopt(ptopt, args, timeout=120):
    p = subprocess.run([ptopt] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check_case(case, ptopt, work, verbose):
    """Returns (row, failures) for one case."""
    fails = []
    row = {"name": case.name, "expect": case.expectation, "ptopt": None, "freeze": None, "err": None,
           "freeze_err": None}
    keys = list(case.want)
    inp = os.path.join(work, case.name + ".pt")
    out = os.path.join(work, case.name + ".opt.pt")
    rpt = os.path.join(work, case.name + ".json")
    eager = build_module(case, inp)

    torch.manual_seed(1234)
    inputs = [torch.randn(s) for s in case.shapes]
    with torch.no_grad():
        ref = eager(*inputs)

    shape_args = []
    for s in case.shapes:
        shape_args += ["--input-shape", ",".join(str(d) for d in s)]
    extra = ["--explain"] if case.explain else []
    rc, so, se = run_ptopt(ptopt, [inp, out, "-O1", "--report", rpt] + shape_args + extra)
    # File names hold the case name ("train_traced_..."): keep them out of the note checks.
    # Scripted modules' source locations name this file: out too.
    text = (so + "\n" + se).replace(case.name, "<case>").replace(SELF, "<src>").lower()
    if verbose:
        print("--- %s: exit %d\n%s%s" % (case.name, rc, so, se))
    if rc != 0:
        fails.append("ptopt exited %d: %s" % (rc, first_line(se)))
    else:
        # Reload in stock PyTorch, compare with eval mode, count ops.
        try:
            opt = torch.jit.load(out)
            opt.eval()
            with torch.no_grad():
                got = opt(*inputs)
            err, allowed = max_error(got, ref)
            row["err"] = err
            if not err <= allowed:
                fails.append("max error %.3g > %.3g" % (err, allowed))
            counts = count_ops(opt.inlined_graph)
            row["ptopt"] = counts
            for k, v in case.want.items():
                if counts[k] != v:
                    what = "must not fold: " if case.must_not_fold and v > 0 else ""
                    fails.append("%s%d %s op(s) left, expected %d" % (what, counts[k], k, v))
        except Exception as e:  # noqa: BLE001 - any reload/run failure is the finding
            fails.append("output does not reload/run in PyTorch: %s" % str(e).strip().splitlines()[0])
        try:
            with open(rpt) as f:
                report = json.load(f)
            if report.get("exit_code") != rc:
                fails.append("report says exit code %r, ptopt exited %d" % (report.get("exit_code"), rc))
            if case.train:
                mode = report.get("mode")
                if mode is None or "train" not in json.dumps(mode).lower():
                    fails.append("report has no \"mode\" object that names training mode (got %r)" % (mode,))
        except (OSError, ValueError) as e:
            fails.append("no readable report: %s" % e)

    # torch.jit.freeze of the same file.
    try:
        frozen = torch.jit.freeze(torch.jit.load(inp))
        fcounts = count_ops(frozen.graph)
        row["freeze"] = fcounts
        with torch.no_grad():
            row["freeze_err"] = max_error(frozen(*inputs), ref)[0]
        if not case.must_not_fold and row["ptopt"] is not None:
            for k in keys:
                if k in STRUCTURAL:
                    continue
                if row["ptopt"][k] > fcounts[k]:
                    fails.append("folds less than freeze: %d %s left, freeze leaves %d" % (row["ptopt"][k], k, fcounts[k]))
    except Exception as e:  # noqa: BLE001
        row["freeze"] = "refused" if case.train else "failed"
        if not case.train:
            fails.append("torch.jit.freeze failed on an eval-mode module: %s" % str(e).strip().splitlines()[0])

    if case.explain and not re.search(case.explain, text):
        fails.append("--explain does not say why the fold declined (no /%s/)" % case.explain)

    # Notes name the real reason.
    if case.note == "traced":
        if not ("traced" in text and "training" in text):
            fails.append("no note saying it was traced in training mode")
    elif case.note == "scripted":
        if not ("script" in text and "training" in text):
            fails.append("no note saying it was scripted and saved in training mode")
        if "traced in training mode" in text:
            fails.append("note says traced in training mode for a scripted module")
    elif case.note == "running-stats":
        if "running stat" not in text:
            fails.append("no note naming BatchNorm without running statistics")
        if "training mode" in text:
            fails.append("note wrongly speaks of training mode")
    else:
        if "training mode" in text:
            fails.append("eval-mode module got a training-mode note")

    # --keep-training: refuses training-mode modules, leaves others alone.
    if case.keep_training is not None:
        out2 = os.path.join(work, case.name + ".keep.pt")
        rc2, so2, se2 = run_ptopt(ptopt, [inp, out2, "-O1", "--keep-training"] + shape_args)
        if rc2 != case.keep_training:
            fails.append("--keep-training exited %d, expected %d: %s"
                         % (rc2, case.keep_training, first_line(se2)))
        elif case.keep_training == 2:
            said = (so2 + se2).replace(case.name, "<case>").lower()
            if os.path.exists(out2):
                fails.append("--keep-training refused but wrote the output")
            if re.search(r"not expected|unknown|unrecognized", said):
                fails.append("--keep-training is not an option: %s" % first_line(se2))
            elif "train" not in said:
                fails.append("--keep-training refusal does not mention training mode")
        elif not os.path.exists(out2):
            fails.append("--keep-training exited 0 but wrote nothing")
    return row, fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ptopt", required=True, help="path of the ptopt executable")
    ap.add_argument("--only", help="run only cases whose name matches this regex")
    ap.add_argument("--keep-dir", help="write the modules here and keep them (default: a temp dir)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print ptopt's output for every case")
    args = ap.parse_args()
    torch.set_num_threads(1)

    cases = build_cases()
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        sys.exit("duplicate case names: %s" % sorted(dup))
    if args.only:
        cases = [c for c in cases if re.search(args.only, c.name)]

    tmp = None
    if args.keep_dir:
        os.makedirs(args.keep_dir, exist_ok=True)
        work = args.keep_dir
    else:
        tmp = tempfile.TemporaryDirectory(prefix="ptopt_freezing_")
        work = tmp.name

    start = time.time()
    rows, failures = [], []
    for case in cases:
        try:
            row, fails = check_case(case, args.ptopt, work, args.verbose)
        except Exception:  # noqa: BLE001 - a broken case is a failure, not a crash
            row = {"name": case.name, "expect": case.expectation, "ptopt": None, "freeze": None, "err": None,
                   "freeze_err": None}
            fails = ["test error: " + traceback.format_exc().strip().splitlines()[-1]]
        row["ok"] = not fails
        rows.append((case, row))
        failures += ["%s: %s" % (case.name, f) for f in fails]

    w = max(len(c.name) for c in cases) if cases else 10
    line = "%-*s  %-26s  %-30s  %-30s  %-9s  %-10s  %s"
    print(line % (w, "case", "expected", "ptopt ops left", "freeze ops left", "max err", "freeze err", "result"))
    for case, row in rows:
        keys = list(case.want)
        fz = row["freeze"] if isinstance(row["freeze"], str) else fmt_counts(row["freeze"], keys)
        err = "-" if row["err"] is None else "%.2e" % row["err"]
        ferr = "-" if row["freeze_err"] is None else "%.2e" % row["freeze_err"]
        print(line % (w, case.name, case.expectation, fmt_counts(row["ptopt"], keys), fz, err, ferr,
                      "ok" if row["ok"] else "FAIL"))
    n_fail = sum(1 for _, r in rows if not r["ok"])
    print("\n%d cases, %d must-not-fold, %d failed (%.0f s)"
          % (len(rows), sum(1 for c, _ in rows if c.must_not_fold), n_fail, time.time() - start))
    if failures:
        print("\nFailures:")
        for f in failures:
            print("  " + f)
    if tmp:
        tmp.cleanup()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
