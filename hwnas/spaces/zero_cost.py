"""Zero-cost proxies: scores of an untrained network that rank architectures by accuracy
without training them.

SynFlow (Tanaka, Kunin, Yamins & Ganguli, "Pruning neural networks without any data by
iteratively conserving synaptic flow", NeurIPS 2020), used as a zero-cost proxy by Abdelfattah,
Mehrotra, Dudziak & Lane ("Zero-Cost Proxies for Lightweight NAS", ICLR 2021): Spearman rho 0.75
with NAS-Bench-201's CIFAR-100 accuracy, measured here over the cells above chance. It needs no
data: an all-ones input through the network with every weight replaced by its absolute value.

``NasBench201Space.surrogate_features`` reads it from a table shipped with the space
(``search_spaces/nasbench201/synflow.csv.gz``); :func:`synflow_of_cell` is the code that made
that table, and a test checks the two agree.
"""

from __future__ import annotations

SEED = 0
"""``torch.manual_seed`` before a network is built: SynFlow depends on the initial weights'
magnitudes."""


def synflow(net, input_shape: tuple[int, ...]) -> float:
    """SynFlow score of ``net``: the sum over every convolution and linear layer of
    ``|weight * d(sum of output)/d(weight)|``, with every parameter replaced by its absolute
    value, in float64, batch norm in eval mode (the identity at initialisation, so the score is
    the network's path norm), and an all-ones input of ``input_shape`` (batch first, for
    example ``(1, 3, 32, 32)``). ``net`` is changed in place (its parameters made absolute and
    float64).

    Returns:
        The score (unitless, >= 0; 0 for a network whose output ignores its input). Scores
        span many orders of magnitude: compare their logarithms.
    """
    import torch

    net = net.double().eval()
    with torch.no_grad():
        for p in net.parameters():
            p.abs_()
    net.zero_grad()
    out = net(torch.ones(input_shape, dtype=torch.float64))
    out = out[0] if isinstance(out, (tuple, list)) else out
    out.sum().backward()
    score = 0.0
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.weight.grad is not None:
                score += float((m.weight * m.weight.grad).abs().sum())
    return score


def synflow_of_cell(space, index: int, dataset: str = "cifar100") -> float:
    """SynFlow of the NAS-Bench-201 cell ``index`` (its ``dataset`` network, built after
    ``torch.manual_seed(SEED)``), as in the shipped table: about 60 ms on one core."""
    import torch

    torch.manual_seed(SEED)
    net = space.build(space.arch_at(index), dataset)
    return synflow(net, (1, *space.dataset(dataset).input_shape))
