"""The meta-learned few-shot predictor: a new device from 5-20 measurements.

Model (all values divided by ``s``, the mean of the device's calibration values, so that
latency and energy on any scale look alike; ``t(a) = y(a) / s``; each encoder output is divided
by its mean on the calibration architectures in the same way)::

    t(a) = sum_k beta_k phi_k(a) + sum_j gamma_j f_j(a) + noise,   noise ~ N(0, sigma_n^2 t^2)

- ``phi(a)`` is the architecture encoder: an MLP with a linear path, meta-trained to predict
  every training device's normalised value of ``a`` (so a new device is sought as a mixture of
  known ones: a GPU at batch 256 like other GPUs at batch 256, a TFLite board like a TFLite
  phone). It reads the space's one-hot encoding, structural counts and graph features; a
  second encoder reads graph features only and serves models known by their ONNX graph. Four
  zero-shot cost proxies (:data:`PROXIES`: multiply-accumulates, parameters, operator nodes,
  tensor elements moved) are appended to ``phi`` as "virtual training devices" (a device bound
  by compute, weights, per-operator overhead or memory traffic), found through the hardware
  embedding as a known device is.
- ``f(a)`` are additive cost features (operation counts, multiply-accumulates, tensor
  elements, with an intercept): per-layer costs add up, so this part extrapolates to devices
  unlike every training device (an accelerator where pooling costs as much as convolution).

The prior of the coefficients comes in families (``alpha`` in :data:`DEFAULT_GRID`):

- mixture (``0 <= alpha <= 1``): ``beta ~ N(alpha w(e), sigma_beta^2 I)``: ``w(e)`` weights the
  training devices by how close their values on the calibration architectures are to the new
  device's (its *hardware embedding* ``e``: the log values on the calibration architectures,
  centred; HELP, Lee et al., NeurIPS 2021, conditions on the same embedding);
  ``gamma ~ N((1 - alpha) mu_f, sigma_gamma Sigma_f)`` with ``mu_f``, ``Sigma_f`` the mean and
  covariance of the training devices' additive costs (empirical Bayes);
- ridge (:data:`RIDGE`): ridge regression on ``phi`` with a free intercept (the cross-device
  baseline, with a learned encoder instead of table columns);
- broad (:data:`BROAD`), single-feature (:data:`SINGLE`) and relevance (:data:`ARD`): Bayesian
  regression of the costs on the additive features standardised over the space's table, by
  feature group (structural counts, graph features, both; one feature at a time), with one
  prior variance per group or, for relevance, one per feature fitted to the values (automatic
  relevance determination, only with more values than coefficients). For a device unlike
  every training device (an edge TPU after GPUs only; NASFLAT's splits, Akhauri & Abdelfattah,
  MLSys 2024), whose costs the training devices' covariance cannot express.

Adaptation is exact Bayesian linear regression for each setting of the grid, and predictions
average the settings (Bayesian model averaging): within a family by marginal likelihood, and
across families (each equally likely a priori) by the mean of the family's log marginal
likelihood and its leave-one-out log predictive density (:data:`DEFAULT_SELECT` "hybrid"): the
marginal likelihood alone prefers a tight prior that explains the values as noise (a mixture
of unlike devices), the leave-one-out density alone is noisy with 5 values. The predictive
standard deviation is that of the averaged posterior. Relative noise makes the fit minimise
relative, not absolute, errors.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from hwnas import __version__
from hwnas.errors import HwnasError
from hwnas.predictors.base import Model, Predictor, check_calibration
from hwnas.predictors.graph import GraphModel
from hwnas.spaces.base import Arch

FORMAT_VERSION = 1
"""Version of the artifact format (``card.json`` ``format_version``); loading checks it."""

DEFAULT_GRID: dict[str, tuple[float, ...]] = {
    "alpha": (-4.0, -3.0, -2.0, -1.0, 0.0, 0.5, 1.0),
    "tau": (0.0003, 0.001, 0.003, 0.01, 0.03, 0.1),
    "sigma_beta": (0.03, 0.1, 0.3),
    "sigma_gamma": (0.03, 0.1, 0.3, 1.0, 3.0),
    "sigma_noise": (0.01, 0.03, 0.1),
    "sigma_broad": (0.001, 0.003, 0.01, 0.03, 0.1, 0.3),
}
"""Hyper-parameter grid of the Bayesian head. ``alpha`` names the prior family (see the module
docstring): in [0, 1] the mixture prior's mean (training-device mixture vs average additive
costs), :data:`RIDGE`, :data:`BROAD`, :data:`SINGLE`, :data:`ARD`. ``tau`` is the temperature
of the hardware-embedding weights: small values pick the one most similar training device (a
new column of a known runtime, another task's networks on a known board), large ones blend
several. ``sigma_noise`` is a relative standard deviation; ``sigma_broad`` the prior variance
of the standardised cost coefficients of the broad and single-feature families."""

DEFAULT_OUTLIER = 0.01
"""Prior probability that one calibration value is a gross error (a measurement taken while
the device throttled, a glitch in a recorded table); see :func:`adapt`. Cards record theirs
(cards without one were written without the contamination model: 0)."""
OUTLIER_SPAN = 100.0
"""A gross error is log-uniform over a range of this ratio (density 1 / (t ln SPAN))."""
OUTLIER_MIN_VALUES = 8
"""Fewer calibration values than this are all taken as clean: with 5 values, dropping one
leaves too few to tell a gross error from a device unlike the training ones (on NASFLAT's
splits at 5 samples the contamination model lost up to 0.02 rho; at 10 and 20 it is even)."""

DEFAULT_SELECT = "hybrid"
"""How the head weighs its prior families (see :func:`adapt`); cards record theirs (cards
without one were written with "evidence")."""
SELECTS = ("evidence", "loo", "family-loo", "hybrid")
"""The weightings :func:`adapt` knows."""

RIDGE = -1.0
"""``alpha`` of the ridge setting (see :data:`DEFAULT_GRID`)."""
ARD = -4.0
"""``alpha`` of the relevance setting: the broad setting with one prior variance per additive
feature, fitted to the calibration values (automatic relevance determination, MacKay 1992;
Tipping, JMLR 2001) and charged half log n per variance (BIC), only for groups with fewer
coefficients than values - 1: features the device's costs do not follow are pruned, so that
the values pin down the others (a GPU at batch 1, whose costs follow operator counts)."""
SINGLE = -3.0
"""``alpha`` of the single-feature setting: the broad setting on one additive feature at a
time (``t = b + c z_j``): two coefficients, for a device measured on very few architectures."""
BROAD = -2.0
"""``alpha`` of the broad setting: cost coefficients of one feature group (structural counts,
graph features, or both), standardised over the space's table, independent with variance
``sigma_broad``, a free intercept, no encoder term. For a device unlike every training device
(an edge TPU after GPUs only), whose costs the training devices' covariance cannot express."""

PROXIES: tuple[str, ...] = ("macs", "params", "nodes", "elems")
"""Zero-shot cost proxies appended to the encoder outputs as extra basis columns ("virtual
training devices"): the multiply-accumulates and the parameters of the network, from its graph
features. A device whose costs follow FLOPs (an FPGA pipeline, an accelerator model) finds that
column through the hardware embedding as it finds a known device's."""


NODE_COLUMNS = ("n_conv", "n_pool", "n_global_pool", "n_add", "n_mul", "n_act")
ELEM_COLUMNS = ("conv_in_elems", "conv_out_elems", "pool_out_elems", "add_elems", "mul_elems",
                "act_elems", "transpose_elems")  # fmt: skip


def proxy_columns(g: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """Zero-shot proxies (n, len(names)) of models with graph features ``g`` (n, G): "macs"
    (all multiply-accumulates), "params"."""
    from hwnas.predictors.graph import COLUMN

    out = []
    for name in names:
        if name == "macs":
            out.append(g[:, [i for c, i in COLUMN.items() if c.startswith("macs_")]].sum(1))
        elif name == "params":
            out.append(g[:, COLUMN["params"]])
        elif name == "nodes":  # operator launches: a runtime bound by per-node overhead
            out.append(g[:, [COLUMN[c] for c in NODE_COLUMNS]].sum(1))
        elif name == "elems":  # tensor elements read and written: a memory-bound runtime
            out.append(g[:, [COLUMN[c] for c in ELEM_COLUMNS]].sum(1))
        else:
            raise HwnasError(f"unknown cost proxy '{name}' in a predictor card")
    return np.stack(out, 1).clip(min=1.0) if out else np.zeros((len(g), 0))


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-np.clip(x, -60, 60)))


def positive_part(mean: np.ndarray, std: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """A linear-Gaussian head's predictions of a positive quantity (latency, energy), (n,)
    each: the mean and standard deviation of its predictive normal conditioned on the value
    being positive (a truncated normal: Johnson, Kotz & Balakrishnan, *Continuous Univariate
    Distributions*, vol. 1, ch. 13) where the head's mean is above ``floor``; ``floor`` (and
    the head's deviation) where it is not (the head extrapolated below zero: ``hwnas predict``
    predicts an ONNX graph's again by FLOPs, :func:`hwnas.predictors.predict.refit_floored`).

    Where the mean is many deviations above zero nothing changes. Where the head's interval
    reaches below zero its mean alone understates the value: on the recorded Pixel 3 (10
    reference values), NAS-Bench-201 cell 13047, whose convolutions cannot reach the cell
    output, was predicted at 0.018 ms (std 2 ms) against 1.47 ms recorded, and a few-shot
    search put it on its front; conditioned on being positive, 1.6 ms (``hwnas predict
    --device pixel3 --arch 13047``). On every unseen device, rho, tau and ±10% accuracy stay
    as they were; MAPE over every cell grows where folding runtimes time the chance-level cells
    (an output that does not depend on the input) near zero (``python
    experiments/help_protocol.py --protocol all``).
    """
    from scipy.special import log_ndtr

    std = np.maximum(std, 1e-12)
    a = -mean / std  # zero, in deviations from the mean
    lam = np.exp(-0.5 * a**2 - 0.5 * np.log(2 * np.pi) - log_ndtr(-a))  # phi(a) / (1 - Phi(a))
    tmean = mean + std * lam
    tstd = std * np.sqrt(np.clip(1 + a * lam - lam**2, 1e-12, None))
    above = mean > floor
    return np.where(above, tmean, floor), np.where(above, tstd, std)


@dataclass
class Encoder:
    """Architecture encoder ``phi``: standardise, then ``softplus(linear(x) + mlp(x))``.

    Shapes: input (n, p) -> output (n, K), one positive value per training column.
    """

    mean: np.ndarray
    scale: np.ndarray
    hidden: list[tuple[np.ndarray, np.ndarray]]
    out: tuple[np.ndarray, np.ndarray]
    linear: tuple[np.ndarray, np.ndarray]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        z = ((x - self.mean) / self.scale).astype(np.float32)
        h = z
        for w, b in self.hidden:
            h = silu(h @ w + b)
        raw = h @ self.out[0] + self.out[1] + z @ self.linear[0] + self.linear[1]
        return softplus(raw.astype(np.float64)) + 1e-6

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        out = {f"{prefix}mean": self.mean, f"{prefix}scale": self.scale}
        for i, (w, b) in enumerate(self.hidden):
            out[f"{prefix}h{i}_w"], out[f"{prefix}h{i}_b"] = w, b
        out[f"{prefix}out_w"], out[f"{prefix}out_b"] = self.out
        out[f"{prefix}lin_w"], out[f"{prefix}lin_b"] = self.linear
        return out

    def problem(self) -> str | None:
        """What is inconsistent in the arrays (shapes that do not chain, values that are not
        finite), or None."""
        p = self.mean.shape[0] if self.mean.ndim == 1 else -1
        if p < 1 or self.scale.shape != (p,):
            return f"mean {self.mean.shape} and scale {self.scale.shape} must be (p,) alike"
        width = p
        for i, (w, b) in enumerate([*self.hidden, self.out]):
            if w.ndim != 2 or w.shape[0] != width or b.shape != (w.shape[1],):
                name = f"h{i}" if i < len(self.hidden) else "out"
                return f"{name} weights {w.shape} and bias {b.shape} do not follow width {width}"
            width = w.shape[1]
        lin_w, lin_b = self.linear
        if lin_w.shape != (p, width) or lin_b.shape != (width,):
            return f"linear weights {lin_w.shape} and bias {lin_b.shape}, expected ({p}, {width})"
        arrays = [self.mean, self.scale, *(a for pair in self.hidden for a in pair)]
        arrays += [*self.out, *self.linear]
        if not all(np.all(np.isfinite(np.asarray(a, dtype=float))) for a in arrays):
            return "values that are not finite"
        return None

    @classmethod
    def from_arrays(cls, data: Any, prefix: str) -> Encoder:
        hidden, i = [], 0
        while f"{prefix}h{i}_w" in data:
            hidden.append((data[f"{prefix}h{i}_w"], data[f"{prefix}h{i}_b"]))
            i += 1
        return cls(
            data[f"{prefix}mean"],
            data[f"{prefix}scale"],
            hidden,
            (data[f"{prefix}out_w"], data[f"{prefix}out_b"]),
            (data[f"{prefix}lin_w"], data[f"{prefix}lin_b"]),
        )


@dataclass
class AdditivePrior:
    """Mean (f,) and covariance (f, f) of the training devices' additive costs."""

    mean: np.ndarray
    cov: np.ndarray


@dataclass
class BayesHead:
    """Posterior of the head after :func:`adapt`: per kept grid setting (and gross-error
    hypothesis), its weight, the coefficient mean (D,) and covariance (D, D), and its relative
    noise variance."""

    weights: np.ndarray
    coefs: list[np.ndarray]
    covs: list[np.ndarray]
    noise: list[float]
    settings: list[tuple[float, ...]] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    """Per kept setting, the calibration value it takes for a gross error (-1: none)."""

    def predict(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised mean and variance for feature rows ``z`` (n, D).

        The variance is that of the mixture: sum_g w_g (z P_g z' + (1 + noise_g) m_g^2) - m^2,
        computed with the weighted mean covariance (the first term is linear in P_g).
        """
        means = z @ np.stack(self.coefs, 1)  # (n, G)
        mean = means @ self.weights
        cov = sum(w * c for w, c in zip(self.weights, self.covs))
        second = (means**2) @ (self.weights * (1.0 + np.asarray(self.noise)))
        var = ((z @ cov) * z).sum(1) + second - mean**2
        return mean, np.maximum(var, 0.0)


def hardware_weights(phi_s: np.ndarray, t_s: np.ndarray, tau: float) -> np.ndarray:
    """Training-device weights from the hardware embedding: softmax over devices of
    -(mean squared distance between centred log values on the calibration architectures)/tau.

    Args:
        phi_s: (n, K) training devices' normalised values on the calibration architectures.
        t_s: (n,) the new device's normalised values.
    """
    e = np.log(t_s) - np.log(t_s).mean()
    ek = np.log(phi_s) - np.log(phi_s).mean(0)
    d = ((ek - e[:, None]) ** 2).mean(0)
    w = np.exp(-(d - d.min()) / tau)
    return w / w.sum()


@dataclass
class BroadBasis:
    """The broad family's additive groups: for each group, the column indices of the additive
    features (the intercept, column 0, excluded) and the features' mean and standard deviation
    over the space's table, so that each group's costs are regressed on standardised features.

    Attributes:
        groups: one index array per group (into the additive feature columns).
        center: (f,) mean of each additive feature over the space's table.
        scale: (f,) its standard deviation (> 0).
    """

    groups: list[np.ndarray]
    center: np.ndarray
    scale: np.ndarray

    def transform(self, g: int, d: int) -> np.ndarray:
        """(d, 1 + |group|) map from (intercept, standardised coefficients) to the raw
        additive coefficients: t = b + sum_j c_j (f_j - m_j) / s_j."""
        cols = self.groups[g]
        out = np.zeros((d, 1 + len(cols)))
        out[0, 0] = 1.0
        out[0, 1:] = -self.center[cols] / self.scale[cols]
        out[cols, 1 + np.arange(len(cols))] = 1.0 / self.scale[cols]
        return out


def ard_variances(
    zb: np.ndarray, t: np.ndarray, sigma_noise: float, iters: int = 100
) -> np.ndarray:
    """Prior variances of standardised cost coefficients by automatic relevance determination
    (MacKay's fixed-point updates of the type-II maximum likelihood; Tipping, JMLR 2001).

    Model: ``t = zb @ w + e``, ``w[0] ~ N(1, 1)`` (the intercept), ``w[j] ~ N(0, lam_j)``,
    ``e ~ N(0, diag((sigma_noise t)^2))``.

    Args:
        zb: (n, 1 + p) intercept and standardised features of the calibration architectures.
        t: (n,) normalised values.
        sigma_noise: relative noise standard deviation.

    Returns:
        (p,) variances in [1e-8, 10].
    """
    p = zb.shape[1] - 1
    lam = np.full(p, 0.1)
    prec = 1.0 / (sigma_noise * t) ** 2
    a = (zb * prec[:, None]).T @ zb
    m0 = np.zeros(p + 1)
    m0[0] = 1.0
    for _ in range(iters):
        inv_prior = np.diag(np.r_[1.0, 1.0 / lam])
        cov = np.linalg.inv(a + inv_prior)
        mean = cov @ (inv_prior @ m0 + (zb * prec[:, None]).T @ t)
        gamma = np.clip(1.0 - np.diag(cov)[1:] / lam, 1e-6, 1.0)
        new = np.clip(mean[1:] ** 2 / gamma, 1e-8, 10.0)
        if np.allclose(new, lam, rtol=1e-4, atol=1e-10):
            lam = new
            break
        lam = new
    return lam


def adapt(
    phi_s: np.ndarray,
    f_s: np.ndarray,
    t_s: np.ndarray,
    prior: AdditivePrior,
    grid: dict[str, Sequence[float]] | None = None,
    keep: float = 1e-4,
    select: str = DEFAULT_SELECT,
    broad: BroadBasis | None = None,
    outlier: float = 0.0,
) -> BayesHead:
    """Bayesian model averaging of exact Bayesian linear regressions over the grid.

    Every grid setting's marginal likelihood is computed in one batch (the prior covariance is
    block-diagonal, so the calibration kernel is ``sb^2 Phi Phi' + F A F' + noise`` with ``A``
    the setting's additive-cost covariance); the posteriors are formed only for the settings
    kept. Prior families (``alpha``): a mixture of training devices (0 <= alpha <= 1), the
    ridge setting (:data:`RIDGE`) and, when ``broad`` is given, the broad, single-feature and
    relevance ones (:data:`BROAD`, :data:`SINGLE`, :data:`ARD`). Each family is equally likely
    a priori, then each of its settings.

    Args:
        phi_s: (n, K) encoder outputs of the calibration architectures.
        f_s: (n, f) their additive features (first column the intercept).
        t_s: (n,) their normalised measured values (> 0).
        prior: additive-cost prior.
        grid: hyper-parameter values (default :data:`DEFAULT_GRID`; missing keys from it).
        keep: settings whose posterior weight is below this are dropped.
        select: "evidence" (every setting by its marginal likelihood), "loo" (by its
            leave-one-out predictive density, pseudo-BMA), "family-loo" (settings by marginal
            likelihood within their family, families by the leave-one-out density of their
            mixture) or "hybrid" (as family-loo, families by the mean of that density and the
            family's log marginal likelihood).
        broad: the additive feature groups of the broad families (None: no such family).
        outlier: prior probability that a value is a gross error (0: every value is taken as
            measured). Each value is then either clean or drawn from a log-uniform density
            over :data:`OUTLIER_SPAN`; the hypotheses "no gross error" and "value i is one"
            are averaged with the settings (the contamination model of Box & Tiao,
            Biometrika 1968), so that one bad value of 10 does not decide the fit; from
            :data:`OUTLIER_MIN_VALUES` values up.

    Raises:
        HwnasError: no setting fits (degenerate measurements), or an unknown ``select``.
    """
    if select not in SELECTS:
        raise HwnasError(f"unknown setting weighting '{select}' in a predictor card")
    grid = {**DEFAULT_GRID, **(grid or {})}
    n, k = phi_s.shape
    df = f_s.shape[1]
    z = np.concatenate([phi_s, f_s], 1)
    d = z.shape[1]
    # every setting's additive-cost prior covariance (f, f), its scale included
    add_covs: list[np.ndarray] = []

    def add_cov(m: np.ndarray) -> int:
        add_covs.append(m)
        return len(add_covs) - 1

    ridge_cov = np.zeros((df, df))
    ridge_cov[0, 0] = 1.0
    groups = broad.groups if broad is not None else []
    parts = [broad.transform(g, df) for g in range(len(groups))]
    settings = []  # (alpha, tau, sigma_beta, additive scale, sigma_noise, additive matrix)
    for mode in grid["alpha"]:
        if mode in (BROAD, SINGLE):
            for g, scale in itertools.product(range(len(groups)), grid["sigma_broad"]):
                if (len(groups[g]) == 1) != (mode == SINGLE):
                    continue
                tr = parts[g]  # unit variance for the intercept, ``scale`` for coefficients
                m = add_cov(tr @ np.diag([1.0] + [scale] * (tr.shape[1] - 1)) @ tr.T)
                settings += [
                    (mode, grid["tau"][0], 0.0, scale, sn, m) for sn in grid["sigma_noise"]
                ]
        elif mode == ARD:
            for g in range(len(groups)):
                if not 2 <= len(groups[g]) < n - 1:
                    continue  # fitted variances need more values than coefficients
                for sn in grid["sigma_noise"]:
                    lam = ard_variances(f_s @ parts[g], t_s, sn)
                    m = add_cov(parts[g] @ np.diag(np.r_[1.0, lam]) @ parts[g].T)
                    settings.append((mode, grid["tau"][0], 0.0, float(len(lam)), sn, m))
        elif mode == RIDGE:
            m = add_cov(ridge_cov)
            pairs = itertools.product(grid["sigma_beta"], grid["sigma_noise"])
            settings += [(mode, grid["tau"][0], sb, 1.0, sn, m) for sb, sn in pairs]
        else:
            taus = grid["tau"] if mode > 0 else grid["tau"][:1]  # tau: mixture weights only
            for sg in grid["sigma_gamma"]:
                m = add_cov(prior.cov * sg)
                settings += [(mode, tau, sb, sg, sn, m) for tau, sb, sn in itertools.product(
                    taus, grid["sigma_beta"], grid["sigma_noise"])]  # fmt: skip
    if not settings:
        raise HwnasError("the predictor's hyper-parameter grid has no setting")
    cfg = np.array(settings, dtype=np.float64)  # (S, 6)
    mode, tau, sb, sg, sn, which = cfg.T
    which = which.astype(np.int64)
    n_fitted = np.where(mode == ARD, sg, 0.0)  # the relevance setting keeps its p there
    weights_of = {t: hardware_weights(phi_s, t_s, t) for t in np.unique(tau)}
    mus = np.zeros((len(cfg), d))
    for i, (m, t) in enumerate(zip(mode, tau)):
        if m in (BROAD, SINGLE, ARD):
            mus[i, k] = 1.0  # the intercept: t is about 1 (values divided by their mean)
        elif m >= 0:
            mus[i, :k] = m * weights_of[t]
            mus[i, k:] = (1 - m) * prior.mean
    grams = np.stack([f_s @ c @ f_s.T for c in add_covs])
    gram_phi = phi_s @ phi_s.T
    kss = (
        sb[:, None, None] ** 2 * gram_phi
        + grams[which]
        + (sn[:, None] ** 2 * t_s**2)[:, :, None] * np.eye(n)
        + 1e-10 * np.eye(n)
    )
    ok = np.ones(len(cfg), dtype=bool)
    chol = np.zeros_like(kss)
    for i in range(len(cfg)):  # batched Cholesky fails as a whole on one bad setting
        try:
            chol[i] = np.linalg.cholesky(kss[i])
        except np.linalg.LinAlgError:
            ok[i] = False
    if not ok.any():
        raise HwnasError("the calibration values could not be fitted (degenerate measurements)")
    r = t_s[None, :] - mus @ z.T  # (S, n)
    kinv = np.linalg.inv(np.where(ok[:, None, None], kss, np.eye(n)))
    a = np.einsum("sij,sj->si", kinv, r)
    loo_var = 1.0 / np.einsum("sii->si", kinv)  # (S, n) leave-one-out predictive variance
    loo_err = a * loo_var  # t_i minus its leave-one-out predictive mean
    loo = -0.5 * np.log(2 * np.pi * loo_var) - 0.5 * loo_err**2 / loo_var  # (S, n) log density
    logdet = np.log(np.einsum("sii->si", chol).clip(min=1e-300)).sum(1)
    evidence = -0.5 * np.einsum("si,si->s", r, a) - logdet - 0.5 * n * np.log(2 * np.pi)
    # the relevance setting's variances are fitted to these values: its maximised evidence is
    # charged the Laplace / BIC price of that fit, half log n per variance
    evidence = evidence - np.where(mode == ARD, 0.5 * n_fitted * np.log(n), 0.0)
    # gross errors: hypothesis h = -1 (every value clean) or h = i (value i is a gross error,
    # drawn from the broad density q, the others clean). log p(t without i) is log p(t) minus
    # value i's leave-one-out log density, so every hypothesis is scored from one inverse
    drops = [-1]
    hyp = [evidence + n * np.log1p(-outlier)]  # (S,) per hypothesis
    log_q = -np.log(t_s * np.log(OUTLIER_SPAN))  # (n,) log-uniform over OUTLIER_SPAN
    if outlier > 0 and n >= OUTLIER_MIN_VALUES:
        for i in range(n):
            drops.append(i)
            hyp.append(
                evidence - loo[:, i] + log_q[i] + np.log(outlier) + (n - 1) * np.log1p(-outlier)
            )
        # each value's leave-one-out density under the contamination model
        loo = np.logaddexp(np.log1p(-outlier) + loo, np.log(outlier) + log_q[None, :])
    ev = np.stack(hyp, 1)  # (S, H)
    n_hyp = ev.shape[1]
    base = loo.sum(1) if select == "loo" else evidence
    score = base[:, None] + ev - ev[:, :1]  # a setting's score, times its hypotheses' odds
    score = np.where(ok[:, None], score, -np.inf)
    # hyper-prior: every prior family (alpha value) equally likely a priori, then its settings
    # equally likely; a uniform prior over grid points would favour the families with the
    # most settings (the mixture ones have one per tau). "evidence" keeps the uniform prior
    # over grid points it was measured with: cards written before the families predict as then
    _, family, count = np.unique(mode, return_inverse=True, return_counts=True)
    if select != "evidence":
        score = score - np.log(count[family])[:, None]
    if select in ("family-loo", "hybrid"):
        # settings (and their hypotheses) weighted by their evidence within their family;
        # families weighted by the leave-one-out predictive density of their evidence-weighted
        # mixture (pseudo-BMA)
        w = np.zeros_like(ev)
        fam_lpd = np.full(family.max() + 1, -np.inf)
        for f in range(family.max() + 1):
            rows = np.nonzero((family == f) & ok)[0]
            if not len(rows):
                continue
            ef = ev[rows]
            wf = np.exp(ef - ef.max())
            wf /= wf.sum()
            w[rows] = wf
            ws = wf.sum(1)  # each setting's weight
            dens = np.log(np.einsum("s,si->i", ws, np.exp(loo[rows] - loo[rows].max(0))))
            fam_lpd[f] = float((dens + loo[rows].max(0)).sum())
            if select == "hybrid":  # half the family's log evidence, half its LOO density
                e = ef - np.log(len(rows))
                fam_lpd[f] = 0.5 * fam_lpd[f] + 0.5 * float(
                    np.log(np.exp(e - e.max()).sum()) + e.max()
                )
        wfam = np.exp(fam_lpd - fam_lpd.max())
        w = w * (wfam / wfam.sum())[family][:, None]
    else:
        w = np.exp(score - score[np.isfinite(score)].max())
    w = np.where(np.isfinite(score), w, 0.0).ravel()
    w /= w.sum()
    kept = [int(j) for j in np.argsort(-w) if w[j] >= keep]
    coefs, covs, noise = [], [], []
    for j in kept:
        i, h = divmod(j, n_hyp)
        sigma = np.zeros((d, d))
        sigma[:k, :k] = np.eye(k) * sb[i] ** 2
        sigma[k:, k:] = add_covs[which[i]]
        if drops[h] < 0:
            zr, l_i, a_i = z, chol[i], a[i]
        else:  # the posterior of the other values
            rows = np.delete(np.arange(n), drops[h])
            zr = z[rows]
            l_i = np.linalg.cholesky(kss[i][np.ix_(rows, rows)])
            a_i = np.linalg.solve(l_i.T, np.linalg.solve(l_i, r[i, rows]))
        sz = sigma @ zr.T  # (D, n)
        coefs.append(mus[i] + sz @ a_i)
        v = np.linalg.solve(l_i, sz.T)  # (n, D)
        covs.append(sigma - v.T @ v)
        noise.append(float(sn[i] ** 2))
    wk = w[kept] / w[kept].sum()
    dropped = [drops[j % n_hyp] for j in kept]
    return BayesHead(wk, coefs, covs, noise, [tuple(settings[j // n_hyp]) for j in kept], dropped)


class MetaPredictor(Predictor):
    """A meta-trained artifact (``latency_predictors/<name>/``) adapted to one device.

    Architectures of the artifact's space take its space path (encoding, structural and graph
    features); ONNX models and architectures of declared spaces (which have no artifact of their
    own) take its graph path, with the graph features of their space's featurizer.

    Args:
        path: the artifact folder (``card.json`` + ``weights.npz``).

    Raises:
        HwnasError: missing or unreadable artifact, or one written by another format version.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.card = read_card(self.path)
        self.name = self.card["name"]
        self.space_name: str = self.card["space"]
        arrays = read_weights(self.path / "weights.npz")
        where = f"predictor weights {self.path / 'weights.npz'}"
        try:
            self.enc_space = Encoder.from_arrays(arrays, "space_")
            self.enc_graph = Encoder.from_arrays(arrays, "graph_")
            self.prior_space = AdditivePrior(arrays["space_prior_mean"], arrays["space_prior_cov"])
            self.prior_graph = AdditivePrior(arrays["graph_prior_mean"], arrays["graph_prior_cov"])
            self.graph_keep = arrays["graph_keep"].astype(np.int64)
            self.graph_scale = arrays["graph_scale"]
        except KeyError as exc:
            raise HwnasError(f"{where} lack the array {exc}") from None
        for name, enc in (("space", self.enc_space), ("graph", self.enc_graph)):
            why = enc.problem()
            if why is not None:
                raise HwnasError(f"{where}: the {name} encoder has {why}")
        for name, prior in (("space", self.prior_space), ("graph", self.prior_graph)):
            f = prior.mean.shape[0] if prior.mean.ndim == 1 else -1
            if prior.cov.shape != (f, f) or not np.all(np.isfinite(prior.cov)):
                raise HwnasError(
                    f"{where}: the {name} prior has mean {prior.mean.shape} and covariance "
                    f"{prior.cov.shape}; expected (f,) and (f, f), finite"
                )
        if self.graph_keep.ndim != 1 or self.graph_scale.shape != self.graph_keep.shape:
            raise HwnasError(
                f"{where}: graph_keep {self.graph_keep.shape} and graph_scale "
                f"{self.graph_scale.shape} must be (g,) alike"
            )
        why = _weights_problem(self, self.card)
        if why is not None:
            raise HwnasError(f"{where}: {why}")
        self.additive: list[str] = list(self.card["model"]["additive_features"])
        self.proxies: list[str] = list(self.card["model"].get("proxies", []))
        self.grid = {k: tuple(v) for k, v in self.card["model"]["grid"].items()}
        self.select: str = self.card["model"].get("select", "evidence")  # checked by read_card
        self.outlier: float = float(self.card["model"].get("outlier", 0.0))
        self._space_head: BayesHead | None = None
        self._graph_head: BayesHead | None = None
        self._in_space: list[int] = []
        self._s = 1.0
        self._min = 0.0
        self._space_scale: np.ndarray | float = 1.0
        self._graph_scale: np.ndarray | float = 1.0

    # -- features --------------------------------------------------------------------------

    @property
    def featurizer(self):
        from hwnas.predictors.featurize import get_featurizer

        return get_featurizer(self.space_name)

    def _graph_x(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        u = g[:, self.graph_keep] / self.graph_scale
        return np.log1p(u), np.concatenate([np.ones((len(u), 1)), u], 1)

    def space_inputs(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        """(encoder input (n, p), additive features (n, f)) of architectures of the space."""
        return self._space_inputs(archs)[:2]

    def _space_inputs(self, archs: Sequence[Arch]):
        fz = self.featurizer
        s = fz.structural(archs)
        g = fz.graph(archs)
        xg, fg = self._graph_x(g)
        x = np.concatenate([fz.encoding(archs), s, xg], 1)
        if x.shape[1] != len(self.enc_space.mean):
            raise HwnasError(
                f"predictor artifact '{self.name}' reads {len(self.enc_space.mean)} features of "
                f"a {self.space_name} architecture, this hwnas computes {x.shape[1]}: it was "
                f"trained by another hwnas version; train it again (`hwnas predictor train`)"
            )
        parts = [np.ones((len(archs), 1))]
        if "structural" in self.additive:
            parts.append(s)
        if "graph" in self.additive:
            parts.append(fg[:, 1:])
        if "merged" in self.additive:
            parts.append(fz.merged(archs))
        return x, np.concatenate(parts, 1), g

    def graph_inputs(self, models: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
        """(encoder input, additive features) of the graph path for any models."""
        return self._graph_x(self._graph_features(models))

    def _own(self, model: Model) -> bool:
        """Whether ``model`` is an architecture of the artifact's space (its space path);
        ONNX models and architectures of other spaces take the graph path."""
        return isinstance(model, Arch) and model.space == self.space_name

    def _graph_features(self, models: Sequence[Model]) -> np.ndarray:
        from hwnas.predictors.featurize import get_featurizer

        rows = [None] * len(models)
        for space in sorted({m.space for m in models if isinstance(m, Arch)}):
            archs = [
                (i, m) for i, m in enumerate(models) if isinstance(m, Arch) and m.space == space
            ]
            g = get_featurizer(space).graph([m for _, m in archs])
            for (i, _), row in zip(archs, g):
                rows[i] = row
        for i, m in enumerate(models):
            if isinstance(m, GraphModel):
                rows[i] = m.features
        return np.stack(rows).astype(np.float64)

    def space_basis(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        """(basis (n, K + P): encoder outputs and cost proxies, additive features (n, f)) of
        architectures of the space, before the calibration scaling."""
        x, f, g = self._space_inputs(archs)
        return np.concatenate([self.enc_space(x), proxy_columns(g, self.proxies)], 1), f

    def graph_basis(self, models: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
        """The same for the graph path (any model, its graph features only)."""
        g = self._graph_features(models)
        x, f = self._graph_x(g)
        return np.concatenate([self.enc_graph(x), proxy_columns(g, self.proxies)], 1), f

    def _check(self, models: Sequence[Model]) -> None:
        from hwnas.spaces import get_space

        for m in models:
            if isinstance(m, Arch) and m.space != self.space_name:
                if get_space(m.space).featurizer_name == m.space:  # a space of its own artifacts
                    raise HwnasError(
                        f"predictor '{self.name}' is for space '{self.space_name}', "
                        f"not '{m.space}' (architecture '{m.text}')"
                    )

    # -- Predictor -------------------------------------------------------------------------

    def fit(self, archs: Sequence[Model], values, metric: str = "latency_ms") -> MetaPredictor:
        """Adapt to one device from its measured values (the reference set, ideally).

        Raises:
            HwnasError: bad calibration values, architectures of another space, or an
                artifact whose card or weights no adaptation can use (a handed one).
        """
        archs = list(archs)
        v = check_calibration(archs, values)
        self._check(archs)
        try:
            with np.errstate(all="ignore"):  # a handed artifact's overflows: said below, once
                return self._fit(archs, v, metric)
        except (ValueError, np.linalg.LinAlgError) as exc:  # numbers no trained artifact has
            raise HwnasError(
                f"predictor '{self.name}' ({self.path}) cannot be adapted on these values "
                f"({type(exc).__name__}: {str(exc)[:120]}): its card.json or weights.npz "
                "hold numbers hwnas's training does not write"
            ) from None

    def _fit(self, archs: list[Model], v: np.ndarray, metric: str) -> MetaPredictor:
        self.metric = metric
        self._s = float(v.mean())
        self._min = float(v.min())
        t = v / self._s
        in_space = [i for i, a in enumerate(archs) if self._own(a)]
        self._in_space = in_space
        self._space_head = None
        if len(in_space) >= 3:
            phi, f = self.space_basis([archs[i] for i in in_space])
            self._space_scale = phi.mean(0)
            phi = phi / self._space_scale
            self._space_head = adapt(
                phi, f, t[in_space], self.prior_space, self.grid, select=self.select,
                broad=self._broad("space"), outlier=self.outlier,
            )  # fmt: skip
        phi, fg = self.graph_basis(archs)
        self._graph_scale = phi.mean(0)
        self._graph_head = adapt(
            phi / self._graph_scale, fg, t, self.prior_graph, self.grid, select=self.select,
            broad=self._broad("graph"), outlier=self.outlier,
        )  # fmt: skip
        for head in (self._space_head, self._graph_head):
            if head is not None and not head.coefs:
                self._graph_head = None
                raise ValueError("no setting of its grid gives a finite fit")
        return self

    def _broad(self, path: str) -> BroadBasis | None:
        """The broad family's feature groups of the space path (structural counts, graph
        features, both) or the graph path (graph features), standardised over the artifact's
        space table; None when the grid has no broad family."""
        if not {BROAD, SINGLE, ARD} & set(self.grid.get("alpha", ())):
            return None
        center, scale, n_struct, n_merged = _table_stats(self.path, self.space_name, path)
        cols = np.arange(1, len(center))
        if path == "graph":
            groups = [cols]
        else:
            struct = cols[:n_struct]
            graph = cols[n_struct : len(cols) - n_merged]
            merged = cols[len(cols) - n_merged :]
            groups = [g for g in (struct, graph) if len(g)]
            if len(groups) == 2:
                groups.append(np.concatenate([struct, graph]))
            if len(merged):  # what a merging runtime runs, beside the counts it merges
                groups.append(np.concatenate([struct, merged]))
        groups += [np.array([c]) for c in cols if scale[c] > 1e-9 * max(1.0, abs(center[c]))]
        return BroadBasis(groups, center, scale)

    def predict(self, archs: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
        """Predicted value and standard deviation (ms or mJ) of each model.

        Raises:
            HwnasError: not adapted yet, or architectures of another space.
        """
        if self._graph_head is None:
            raise HwnasError(f"predictor '{self.name}' must be adapted (fit) before predicting")
        archs = list(archs)
        self._check(archs)
        mean, var = np.zeros(len(archs)), np.zeros(len(archs))
        space_rows = [i for i, a in enumerate(archs) if self._own(a)]
        if self._space_head is None:
            space_rows = []
        other = sorted(set(range(len(archs))) - set(space_rows))
        if space_rows:
            phi, f = self.space_basis([archs[i] for i in space_rows])
            z = np.concatenate([phi / self._space_scale, f], 1)
            mean[space_rows], var[space_rows] = self._space_head.predict(z)
        if other:
            phi, fg = self.graph_basis([archs[i] for i in other])
            z = np.concatenate([phi / self._graph_scale, fg], 1)
            mean[other], var[other] = self._graph_head.predict(z)
        floor = 1e-3 * self._min / self._s
        mean, std = positive_part(mean, np.sqrt(var), floor)
        return mean * self._s, std * self._s

    def suspect_values(self, threshold: float = 0.5) -> dict[int, float]:
        """Calibration values the head took for gross errors (the contamination model of
        :func:`adapt`), by the space head when the values were architectures of the artifact's
        space, else by the graph head: index -> posterior probability (>= ``threshold``)."""
        if self._space_head is not None:
            head, rows = self._space_head, self._in_space
        elif self._graph_head is not None:
            head, rows = self._graph_head, None
        else:
            return {}
        prob: dict[int, float] = {}
        for w, i in zip(head.weights, head.dropped):
            if i >= 0:
                j = rows[i] if rows is not None else i
                prob[j] = prob.get(j, 0.0) + float(w)
        return {j: p for j, p in sorted(prob.items()) if p >= threshold}

    @property
    def head(self) -> BayesHead | None:
        """The adapted space head (None before :meth:`fit`)."""
        return self._space_head


@lru_cache(maxsize=16)
def _table_stats(path: Path, space: str, which: str) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(mean (f,), std (f,), number of structural columns, number of merged columns, the
    last ones) of an artifact's additive features over every architecture of its space's table
    (the intercept column has mean 1, std 1)."""
    pred = MetaPredictor(path)
    archs = pred.featurizer.space.all_archs()
    n_struct = n_merged = 0
    if which == "graph":
        f = pred._graph_x(pred.featurizer.graph(archs))[1]
    else:
        f = pred._space_inputs(archs)[1]
        if "structural" in pred.additive:
            n_struct = len(pred.featurizer.structural_names)
        if "merged" in pred.additive:
            n_merged = len(pred.featurizer.merged_names)
    center, scale = f.mean(0), f.std(0)
    center[0], scale[0] = 1.0, 1.0
    return center, np.where(scale > 1e-12, scale, 1.0), n_struct, n_merged


# -- artifacts -------------------------------------------------------------------------------


MAX_WEIGHTS_BYTES = 64 * 2**20
"""Largest ``weights.npz`` read, on disk and unpacked (its arrays together): a shipped artifact
has under 1 MiB of arrays (encoders of 2 x 256 hidden units over about 50 training columns)."""
MAX_WEIGHT_ARRAYS = 256
"""Most arrays a ``weights.npz`` may hold (a shipped one has 25)."""
MAX_ENCODER_WIDTH = 4096
"""Widest encoder layer an artifact may have (shipped ones: 256 hidden units)."""
MAX_ENCODER_LAYERS = 16
"""Most hidden layers an artifact's encoder may have (shipped ones: 2)."""
MAX_TRAINING_DEVICES = 1024
"""Most training columns a card may name (shipped cards: 12 to 46); each is an encoder output."""
MAX_GRID_VALUES = 16
"""Most values one hyper-parameter of a card's grid may have (shipped cards: at most 7)."""
MAX_GRID_SETTINGS = 4096
"""Most combinations of a card's ``alpha``, ``tau``, ``sigma_beta``, ``sigma_gamma`` and
``sigma_noise`` (shipped cards: 1,890): adaptation builds one kernel matrix per setting."""
ADDITIVE_GROUPS = ("structural", "graph", "merged")
"""The additive feature groups a card may name (``model.additive_features``)."""


def read_weights(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an artifact's ``weights.npz`` (a zip of ``.npy`` files, as
    :func:`numpy.savez_compressed` writes it), read without trusting it: a regular file of at
    most :data:`MAX_WEIGHTS_BYTES`, whose members unpack (as their zip headers declare, which
    the reader enforces) to at most that many bytes together, numeric arrays whose declared
    shapes fit their bytes, no Python objects.

    Raises:
        HwnasError: missing, not a regular file, too large, or not such a zip.
    """
    from hwnas.paths import read_bounded

    where = f"predictor weights {path}"
    try:
        raw = read_bounded(path, MAX_WEIGHTS_BYTES)
    except FileNotFoundError:
        raise HwnasError(f"cannot read {where}: no such file") from None
    except OSError as exc:
        raise HwnasError(f"cannot read {where}: {exc.strerror or exc}") from None
    arrays: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_WEIGHT_ARRAYS:
                raise HwnasError(
                    f"{where}: {len(infos)} arrays, more than the {MAX_WEIGHT_ARRAYS} an "
                    "artifact may have"
                )
            total = sum(i.file_size for i in infos)
            if total > MAX_WEIGHTS_BYTES:
                raise HwnasError(
                    f"{where}: its arrays unpack to {total / 2**20:.0f} MiB, more than the "
                    f"{MAX_WEIGHTS_BYTES / 2**20:g} MiB an artifact may have"
                )
            for info in infos:
                name = info.filename
                if not name.endswith(".npy") or info.compress_type not in (
                    zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED
                ):  # fmt: skip
                    raise HwnasError(f"{where}: member {name!r} is not a stored or deflated .npy")
                arrays[name[: -len(".npy")]] = _npy_array(zf.read(info), name, where)
    except (OSError, ValueError, EOFError, RuntimeError, zipfile.BadZipFile, zlib.error) as exc:
        raise HwnasError(f"cannot read {where}: {exc}") from None
    return arrays


def _npy_array(data: bytes, name: str, where: str) -> np.ndarray:
    """The numeric array of one ``.npy`` member, its header checked against its size first
    (a header may declare any shape)."""
    from numpy.lib import format as npy

    buf = io.BytesIO(data)
    version = npy.read_magic(buf)
    if version == (1, 0):
        shape, _fortran, dtype = npy.read_array_header_1_0(buf)
    elif version == (2, 0):
        shape, _fortran, dtype = npy.read_array_header_2_0(buf)
    else:
        raise HwnasError(f"{where}: member {name!r} has .npy format {version}")
    if dtype.hasobject or dtype.kind not in "biuf":
        raise HwnasError(f"{where}: member {name!r} holds {dtype}, not numbers")
    if math.prod(shape) * dtype.itemsize > len(data):
        raise HwnasError(f"{where}: member {name!r} declares shape {shape}, more than its bytes")
    buf.seek(0)
    return npy.read_array(buf, allow_pickle=False)


def _weights_problem(pred: MetaPredictor, card: dict[str, Any]) -> str | None:
    """What in an artifact's arrays disagrees with its card (encoder widths, training
    columns, graph features), or None."""
    from hwnas.predictors.graph import GRAPH_COLUMNS

    model = card["model"]
    k = len(card["training_devices"])
    hidden = model.get("encoder", {}).get("hidden")
    for name, enc in (("space", pred.enc_space), ("graph", pred.enc_graph)):
        widths = [w.shape[1] for w, _ in enc.hidden]
        if len(widths) > MAX_ENCODER_LAYERS or max(widths, default=0) > MAX_ENCODER_WIDTH:
            return (
                f"the {name} encoder has hidden layers {widths}, more than "
                f"{MAX_ENCODER_LAYERS} or wider than {MAX_ENCODER_WIDTH}"
            )
        if hidden is not None and widths != list(hidden):
            return f"the {name} encoder has hidden layers {widths}, the card says {hidden}"
        if enc.out[0].shape[1] != k:
            return (
                f"the {name} encoder has {enc.out[0].shape[1]} outputs, the card names "
                f"{k} training devices"
            )
    g = len(pred.graph_keep)
    names = model.get("graph_features")
    if names is not None and len(names) != g:
        return f"graph_keep has {g} features, the card names {len(names)}"
    if g and not (0 <= pred.graph_keep.min() and pred.graph_keep.max() < len(GRAPH_COLUMNS)):
        return f"graph_keep indices must be in 0..{len(GRAPH_COLUMNS) - 1}"
    if not (np.all(np.isfinite(pred.graph_scale)) and np.all(pred.graph_scale > 0)):
        return "graph_scale values must be finite and positive"
    if pred.enc_graph.mean.shape != (g,) or pred.prior_graph.mean.shape != (g + 1,):
        return (
            f"the graph encoder reads {pred.enc_graph.mean.shape[0]} features and the graph "
            f"prior has {pred.prior_graph.mean.shape[0]} costs; graph_keep has {g} (and an "
            "intercept)"
        )
    return None


def read_card(path: Path) -> dict[str, Any]:
    """The card of the artifact folder ``path``, its fields checked (types, known values, and
    sizes: at most :data:`MAX_TRAINING_DEVICES` training columns, grids of at most
    :data:`MAX_GRID_VALUES` values per hyper-parameter and :data:`MAX_GRID_SETTINGS` settings).

    Raises:
        HwnasError: missing or unreadable card (not a regular file, over 64 MiB, not JSON), a
            format version this hwnas cannot read, or a missing or malformed field; one line.
    """
    from hwnas.paths import read_bounded_text

    card_path = Path(path) / "card.json"
    if not card_path.exists():
        raise HwnasError(f"not a predictor artifact (no card.json): {path}")
    try:
        card = json.loads(read_bounded_text(card_path))
    except OSError as exc:
        raise HwnasError(f"cannot read predictor card {card_path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise HwnasError(f"cannot read predictor card {card_path}: {exc}") from None
    version = card.get("format_version") if isinstance(card, dict) else None
    if version != FORMAT_VERSION:
        raise HwnasError(
            f"predictor artifact {path} has format version {version}; this hwnas "
            f"({__version__}) reads version {FORMAT_VERSION}: rebuild it with "
            "`hwnas predictor train`"
        )
    why = _card_problem(card)
    if why is not None:
        sep = "" if why.startswith("has no") else ":"
        raise HwnasError(f"predictor card {card_path}{sep} {why}")
    return card


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable()


def _is_number(value: Any) -> bool:
    return _is_real(value) and math.isfinite(value)


def _is_real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text_list(card: dict, key: str, most: int, required: bool = True) -> str | None:
    if key not in card and not required:
        return None
    value = card.get(key)
    if not isinstance(value, list) or not all(_is_text(v) for v in value):
        return f"{key} must be a list of names, got {_short(value)}"
    if len(value) > most:
        return f"{key} has {len(value)} entries, more than {most}"
    return None


def _short(value: Any) -> str:
    text = repr(value)  # escaped: a card's text reaches the terminal as it is
    return text if len(text) <= 60 else text[:57] + "..."


def _card_problem(card: dict[str, Any]) -> str | None:
    """What is missing or malformed in a card's fields, or None."""
    for key in ("name", "space", "kind"):
        if key not in card:
            return f"has no '{key}'"
        if not _is_text(card[key]):
            return f"{key} must be a printable name, got {_short(card[key])}"
    if card["kind"] != "meta":
        return f"kind must be 'meta', got {_short(card['kind'])}"
    if "training_devices" not in card:
        return "has no 'training_devices'"
    why = _text_list(card, "training_devices", MAX_TRAINING_DEVICES)
    why = why or _text_list(card, "metrics", 16, required=False)
    if why:
        return why
    metrics = card.get("metrics", ["latency_ms"])
    if not metrics or not set(metrics) <= {"latency_ms", "energy_mj"}:
        return f"metrics must list latency_ms and/or energy_mj, got {_short(metrics)}"
    split = card.get("split", {})
    if not isinstance(split, dict):
        return f"split must be an object, got {_short(split)}"
    why = _text_list(split, "meta_test", MAX_TRAINING_DEVICES, required=False)
    if why:
        return f"split.{why}"
    scores = card.get("scores", {})
    if not isinstance(scores, dict) or not isinstance(scores.get("protocol", ""), str):
        return f"scores must be an object with a 'protocol' text, got {_short(scores)}"
    for key in ("mean", "devices"):
        if not isinstance(scores.get(key, {}), dict):
            return f"scores.{key} must be an object, got {_short(scores[key])}"
    if not all(_is_real(v) for v in scores.get("mean", {}).values()):
        return f"scores.mean values must be numbers, got {_short(scores['mean'])}"
    if "model" not in card:
        return "has no 'model'"
    if not isinstance(card["model"], dict):
        return f"model must be an object, got {_short(card['model'])}"
    return _model_problem(card["model"])


def _model_problem(model: dict[str, Any]) -> str | None:
    additive = model.get("additive_features")
    if (
        not isinstance(additive, list)
        or not additive
        or not all(isinstance(a, str) for a in additive)
        or not set(additive) <= set(ADDITIVE_GROUPS)
    ):
        return (
            f"model.additive_features must be a list of {', '.join(ADDITIVE_GROUPS)}, got "
            f"{_short(additive)}"
        )
    proxies = model.get("proxies", [])
    if (
        not isinstance(proxies, list)
        or not all(isinstance(p, str) for p in proxies)
        or not set(proxies) <= set(PROXIES)
    ):
        return f"model.proxies must be a list of {', '.join(PROXIES)}, got {_short(proxies)}"
    if "graph_features" in model:
        why = _text_list(model, "graph_features", 1024)
        if why:
            return f"model.{why}"
    encoder = model.get("encoder", {})
    hidden = encoder.get("hidden", []) if isinstance(encoder, dict) else None
    if (
        not isinstance(hidden, list)
        or len(hidden) > MAX_ENCODER_LAYERS
        or not all(type(h) is int and 1 <= h <= MAX_ENCODER_WIDTH for h in hidden)
    ):
        return (
            f"model.encoder.hidden must be at most {MAX_ENCODER_LAYERS} widths in "
            f"1..{MAX_ENCODER_WIDTH}, got {_short(encoder)}"
        )
    select = model.get("select", "evidence")
    if select not in SELECTS:
        return f"model.select must be one of {', '.join(SELECTS)}, got {_short(select)}"
    outlier = model.get("outlier", 0.0)
    if not _is_number(outlier) or not 0.0 <= outlier < 0.5:
        return f"model.outlier must be a probability in [0, 0.5), got {_short(outlier)}"
    return _grid_problem(model.get("grid"))


def _grid_problem(grid: Any) -> str | None:
    if not isinstance(grid, dict):
        return f"model.grid must be an object, got {_short(grid)}"
    for key, values in grid.items():
        where = f"model.grid.{key}"
        if key not in DEFAULT_GRID:
            return f"model.grid has an unknown hyper-parameter {_short(key)}"
        if isinstance(values, list) and len(values) > MAX_GRID_VALUES:
            return f"{where} has {len(values)} values, more than {MAX_GRID_VALUES}"
        if not isinstance(values, list) or not values:
            return f"{where} must be a list of 1 to {MAX_GRID_VALUES} numbers, got {_short(values)}"
        if not all(_is_number(v) for v in values):
            return f"{where} must hold finite numbers, got {_short(values)}"
        if key == "alpha":
            bad = [v for v in values if not (0.0 <= v <= 1.0 or v in (RIDGE, BROAD, SINGLE, ARD))]
            if bad:
                return (
                    f"{where} values must be in [0, 1] or {RIDGE:g}, {BROAD:g}, {SINGLE:g}, "
                    f"{ARD:g}, got {_short(bad)}"
                )
        elif not all(v > 0 for v in values):
            return f"{where} values must be positive, got {_short(values)}"
    full = {**DEFAULT_GRID, **grid}
    settings = math.prod(len(full[k]) for k in ("alpha", "tau", "sigma_beta", "sigma_gamma",
                                                "sigma_noise"))  # fmt: skip
    if settings > MAX_GRID_SETTINGS:
        return (
            f"model.grid has {settings} settings, more than the {MAX_GRID_SETTINGS} "
            "adaptation may try"
        )
    return None
