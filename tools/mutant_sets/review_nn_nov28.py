"""Defects a review found (session of 2026-11-28, evening), each planted back: the tests
written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant

NN = "tests/test_nn_review_nov28.py::"
INTEGERS = NN + "test_integer_inputs_to_floating_point_functions_are_refused"

MUTANTS: list[Mutant] = [
    Mutant(
        "sequential-reads-a-list-as-a-pair",
        "minitorch_amp/nn/layer/container.py",
        '        if all(_is_pair(pair) for pair in layers):\n            return _check_pairs("Sequential", layers)\n',
        "        if layers and isinstance(layers[0], (list, tuple)):\n            return [(str(pair[0]), pair[1]) for pair in layers]\n",
        (NN + "test_a_list_of_layers_given_to_sequential_is_refused_with_the_spelling_to_use",),
        "nn.Sequential([a, b]) names layer b after layer a and drops a, silently",
    ),
    Mutant(
        "layer-list-extend-appends-one-by-one",
        "minitorch_amp/nn/layer/container.py",
        '        layers = [_check_layer("LayerList", layer) for layer in sublayers]\n        for layer in layers:\n            self._sub_layers[str(len(self))] = layer\n',
        '        for layer in sublayers:\n            self._sub_layers[str(len(self))] = _check_layer("LayerList", layer)\n',
        (NN + "test_a_refused_extend_update_or_construction_leaves_the_container_unchanged",),
        "LayerList.extend refuses a bad item after adding the good ones before it",
    ),
    Mutant(
        "layer-dict-update-adds-one-by-one",
        "minitorch_amp/nn/layer/container.py",
        '        for key, layer in _check_pairs("LayerDict", pairs):\n            self.add_sublayer(key, layer)\n',
        '        for pair in pairs:\n            for key, layer in _check_pairs("LayerDict", [pair]):\n                self.add_sublayer(key, layer)\n',
        (NN + "test_a_refused_extend_update_or_construction_leaves_the_container_unchanged",),
        "LayerDict.update refuses a bad entry after adding the good ones before it",
    ),
    Mutant(
        "conv-layer-checks-padding-channels-first",
        "minitorch_amp/nn/layer/conv.py",
        "        channel_last = data_format == self._formats[1]\n",
        "        channel_last = False\n",
        (NN + "test_conv_layers_take_the_channels_last_pair_form_of_padding",),
        "nn.Conv2D(data_format='NHWC') refuses the NHWC pair form of padding F.conv2d takes",
    ),
    Mutant(
        "softmax-truncates-integers",
        "minitorch_amp/autograd/ops/activation.py",
        '        if x.dtype.kind in "biu":\n            raise float_only("softmax", x.dtype)\n',
        "",
        (INTEGERS + "[softmax]",),
        "F.softmax of an int64 tensor gives int64 zeros and ones, silently",
    ),
    Mutant(
        "functionals-take-integers",
        "minitorch_amp/nn/functional/common.py",
        '    if kind in "biu":\n        raise float_only(fn, x.dtype)\n',
        "",
        (INTEGERS + "[conv2d]", INTEGERS + "[rms_norm]", INTEGERS + "[mse_loss]"),
        "F.conv2d, F.rms_norm and F.mse_loss of int64 inputs compute in integers, silently",
    ),
    Mutant(
        "dropout-wraps-an-axis-past-the-rank",
        "minitorch_amp/autograd/ops/nn_ops.py",
        "    if len(axes) > ndim or max(axes) >= ndim:\n",
        "    if len(axes) > ndim:\n",
        (NN + "test_dropout_refuses_an_axis_outside_the_input_before_drawing",),
        "F.dropout(axis=3) on a 3-D input draws a mask over no axis instead of refusing",
    ),
    Mutant(
        "soft-label-weight-ignored",
        "minitorch_amp/nn/functional/loss.py",
        "        losses = losses * sample_weights\n",
        "",
        (NN + "test_cross_entropy_with_soft_labels_follows_paddle_with_and_without_weight",),
        "cross_entropy(soft_label=True, weight=w) leaves the samples' losses unweighted",
    ),
    Mutant(
        "soft-label-takes-an-ignore-index",
        "minitorch_amp/nn/functional/loss.py",
        "    if soft_label and ignore_index != -100:\n",
        "    if False:\n",
        (NN + "test_soft_labels_with_an_ignore_index_are_refused_at_construction_and_call",),
        "CrossEntropyLoss(soft_label=True, ignore_index=0) is accepted; the index means nothing",
    ),
    Mutant(
        "use-softmax-false-ignored",
        "minitorch_amp/nn/functional/loss.py",
        "    if not use_softmax:\n",
        "    if False:\n",
        (NN + "test_cross_entropy_without_softmax_reads_input_as_probabilities",),
        "cross_entropy(use_softmax=False) takes probabilities for logits and softmaxes them again",
    ),
    Mutant(
        "pad-layer-truncates-widths",
        "minitorch_amp/nn/layer/padding.py",
        '        widths = pad_widths(padding, kind, "padding")  # F.pad\'s check: ints only, never truncated\n',
        "        widths = [int(w) for w in padding]\n",
        (NN + "test_pad_layers_refuse_fractional_and_negative_widths_at_construction",),
        "nn.Pad2D([1.9, 1, 1, 1]) pads 1, silently, where F.pad refuses the width",
    ),
    Mutant(
        "pad-layer-takes-negative-widths",
        "minitorch_amp/nn/layer/padding.py",
        "        if any(w < 0 for w in widths):\n",
        "        if False:\n",
        (NN + "test_pad_layers_refuse_fractional_and_negative_widths_at_construction",),
        "nn.Pad1D(-1) is built and refused only at its first forward",
    ),
    Mutant(
        "relu-without-name",
        "minitorch_amp/nn/functional/activation.py",
        "def relu(x: Tensor, name=None) -> Tensor:\n",
        "def relu(x: Tensor) -> Tensor:\n",
        (NN + "test_every_public_functional_takes_paddles_name_argument",),
        "F.relu(x, name='r') (Paddle's signature) raises TypeError",
    ),
]
