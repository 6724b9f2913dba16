"""Kernel-level latency prediction for any ONNX model on a live ONNX Runtime device.

nn-Meter (Zhang et al., MobiSys 2021) predicts a network's latency as the sum of the latencies
of the kernels the runtime runs, one regressor per kernel type fitted on kernel configurations
timed on the device, sampled where the prediction is least certain. Here:

- :mod:`.read`: the kernels ONNX Runtime runs for a model, read from its own optimised graph;
- :mod:`.timing`: a kernel timed alone on the device, once, through the measurement store;
- :mod:`.features`: kernel types and configuration features;
- :mod:`.regress`: one random forest per kernel type, with uncertainty and fitted range;
- :mod:`.sampling`: generated kernel patterns and adaptive sampling;
- :mod:`.model`: :class:`~.model.KernelPredictor`, the network-level predictor (sum,
  correction, calibrated interval, warnings);
- :mod:`.device`: the predictor of one device, calibrated on what its store holds;
- :mod:`.cost`: ``cost=kernel``, the search cost model at deployment size.
"""
