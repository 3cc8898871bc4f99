"""Small arrays that ops build on the host and read on the device, uploaded once per device.

An average pool's window counts, an adaptive pool's averaging matrices, the source positions
of a reflect pad, a masked fill's value, FP8's decoding table: each depends only on shapes,
settings and a value, not on the data. An op that built and uploaded it in every call would
pay a host-to-device copy in every training step, and the step could not be captured as a
CUDA graph (a capture cannot record an upload). :func:`device_constant` builds and uploads
each the first time its key is seen on a device and finds it again after that.

The NumPy backend keeps them the same way and declares the same first upload
(``sync.upload``), so the CPU test suite proves, with the sync debug mode, that a training
step uploads nothing after its first iteration. The arrays are shared between calls: ops only
read them (on NumPy they are read-only, so a write would raise).

Example:
    >>> import numpy as np
    >>> like = np.zeros(3, np.float32)
    >>> a = device_constant(like, ("doctest", 3), lambda: np.arange(3.0), "a doctest table")
    >>> a is device_constant(like, ("doctest", 3), lambda: np.arange(3.0), "a doctest table")
    True
    >>> a.flags.writeable
    False
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from . import graphs, sync
from .device import get_array_module

CACHE_SIZE = 256  # arrays kept; the least recently used beyond this is dropped
_cache: OrderedDict = OrderedDict()


def device_constant(like, key: tuple, build, what: str):
    """The array ``build()`` makes (host data), on ``like``'s device, built once per ``key``.

    ``key`` must determine the array completely (every shape, setting and value it depends
    on); the device is added to it here. ``what`` names the array in the sync debug mode's
    report of the first upload and in the error a CUDA graph capture raises when the array is
    not cached yet. An array used while a graph is captured is kept alive by the graph.

    Raises:
        GraphError: the array is not cached yet and a capture is in progress.
    """
    xp = get_array_module(like)
    device = -1 if xp is np else like.device.id
    full_key = (device, *key)
    array = _cache.get(full_key)
    if array is not None:
        _cache.move_to_end(full_key)
    else:
        graphs.refuse_in_capture(
            what,
            "it is built on the host and uploaded the first time it is needed; run the step "
            "eagerly once before the capture, so that the capture finds it on the device",
        )
        sync.upload(what)
        host = np.array(build())  # (a copy: the cache owns it)
        if xp is np:
            host.flags.writeable = False
            array = host
        else:
            with like.device:
                array = xp.asarray(host)
        _cache[full_key] = array
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    if xp is not np:
        capture = graphs.active()
        if capture is not None:  # the graph reads it after the cache may have dropped it
            capture.keep_alive.append(array)
    return array
