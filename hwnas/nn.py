"""Choice points for writing a search space as an ordinary PyTorch module.

In the spirit of NNI's model space (``LayerChoice``, ``ValueChoice``, ``Repeat``; Zhang et al.,
NNI 2.x / Retiarii, OSDI 2020): a space is a ``torch.nn.Module`` whose constructor puts
:class:`Choice` where an operation is chosen and :class:`ValueChoice` where a number (a width,
a kernel size, a depth) is chosen. The module is built at its largest (every
:class:`ValueChoice` acts as its largest value), so it *is* the weight-sharing supernet;
:func:`hwnas.nn.space` (or :func:`hwnas.spaces.module.module_space`) turns it into a
:class:`~hwnas.spaces.SearchSpace` with arch strings, sampling, encodings, a supernet with exact
subnet extraction, ONNX export, cost models and zoo entries (:mod:`hwnas.spaces.module`)::

    import torch
    from torch import nn
    import hwnas.nn as hn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            width = hn.ValueChoice([16, 32], label="width")
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width),
                                      nn.ReLU())
            self.mix = hn.Choice({"conv3": nn.Conv2d(width, width, 3, padding=1),
                                  "conv5": nn.Conv2d(width, width, 5, padding=2),
                                  "skip": nn.Identity()}, label="op")
            self.head = nn.Linear(width, 10)

        def forward(self, x):
            return self.head(self.mix(self.stem(x)).mean((2, 3)))

    space = hn.space(Net(), torch.zeros(1, 3, 16, 16), name="mynet", dataset="digits")

Where a choice point may go:

- ``ValueChoice`` as the ``out_channels`` of an ``nn.Conv2d`` or ``nn.Conv1d``, or the
  ``out_features`` of an ``nn.Linear``: the width of the channels that layer produces (and of
  every layer tied to them by residual additions, found by tracing). Pass the same object as the
  ``in_channels`` / ``num_features`` of the layers that take them (they act as its largest
  value), and as the width of every layer whose output is added to or multiplied with them: two
  different ``ValueChoice`` on channels tied so stop the space in one line naming both layers.
- ``ValueChoice`` as the ``kernel_size`` of an ``nn.Conv2d`` or ``nn.Conv1d`` with
  ``padding=k // 2``: the kernel size; a smaller kernel is the centre of the largest.
- Anywhere else (a stride, a pooling kernel, ``num_heads``) a ``ValueChoice`` stops the space in
  one line naming the layer and the argument.
- ``ValueChoice`` as the ``depth`` of :class:`Repeat`: how many of its blocks run (its blocks past
  the smallest depth must keep their input's shape; at least one runs: a block that may be left
  out is a :class:`Choice` of it and ``nn.Identity()``).
- :class:`Choice` for an operation: every candidate takes the same input and gives the same
  output shape.

The same object (or label) used in several places is one decision. Arithmetic on a
``ValueChoice`` (``width * 4``) gives a plain ``int``: a fixed value (its largest's). A
``ValueChoice`` made in a module's constructor must reach a layer or a :class:`Repeat` itself:
one consumed only as a number (``range(depth)``, only ever ``width * 4``) would leave nothing to
search, and the space stops in one line naming it.
"""

from __future__ import annotations

from typing import Any

from hwnas.errors import UnknownNameError, keyword_terms
from hwnas.spaces.module.choices import TRACING, Choice, Repeat, ValueChoice

__all__ = ["Choice", "Repeat", "TRACING", "ValueChoice", "space"]


@keyword_terms(public="hwnas.nn.space")
def space(model: Any, example_input: Any, **kwargs: Any):
    """The search space of a module with :class:`Choice` / :class:`ValueChoice` choice points
    (:func:`hwnas.spaces.module.module_space`; keyword arguments as there).

    Raises:
        HwnasError: a module that cannot be traced, a choice point that cannot be honoured (the
            message names the layer), or no choice point at all.
    """
    import inspect

    from hwnas.spaces.module import module_space

    own = [p.name for p in inspect.signature(module_space).parameters.values()
           if p.kind is p.KEYWORD_ONLY]  # fmt: skip
    for key in kwargs:  # nmae="x": one line with the closest names, not a TypeError
        if key not in own:
            raise UnknownNameError("option of hwnas.nn.space", key, own)
    return module_space(model, example_input, **kwargs)
