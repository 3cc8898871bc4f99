"""``Tensor.cuda`` as Paddle writes it, ``cuda(device_id=None, blocking=True)``: None is the
current GPU; PyTorch's ``non_blocking`` is taken too. The device each call asks ``Tensor.to``
for is recorded, so no GPU is needed."""

from __future__ import annotations

import pytest

import minitorch_amp as mt
from minitorch_amp.autograd.tensor import Tensor
from minitorch_amp.backend import device as _device


@pytest.fixture
def asked(monkeypatch):
    calls = []
    monkeypatch.setattr(Tensor, "to", lambda self, *args, **kwargs: calls.append((args, kwargs)))
    return calls


def test_cuda_without_an_index_asks_for_the_current_gpu(asked, monkeypatch):
    x = mt.to_tensor([1.0])
    x.cuda()  # the CPU is current: GPU 0
    monkeypatch.setattr(_device, "_current", _device.Place("gpu", 1))
    x.cuda()
    x.cuda(None, blocking=False)
    x.cuda(0, non_blocking=True)
    assert asked == [
        (("gpu:0",), {}),
        (("gpu:1",), {}),
        (("gpu:1",), {"blocking": False}),
        (("gpu:0",), {"non_blocking": True}),
    ]


@pytest.mark.parametrize("device_id", ["gpu:1", 1.0, True])
def test_cuda_refuses_a_device_id_that_is_not_an_int(asked, device_id):
    with pytest.raises(TypeError, match="device_id must be an int or None"):
        mt.to_tensor([1.0]).cuda(device_id)
    assert asked == []
