"""Per-device regressor for devices with many measurements (scikit-learn extra trees on the
space's features; the spread of the trees gives the uncertainty)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hwnas.errors import HwnasError
from hwnas.predictors.base import Model, Predictor, check_calibration
from hwnas.spaces.base import Arch


def _features(archs: Sequence[Arch]) -> np.ndarray:
    from hwnas.predictors.featurize import get_featurizer

    spaces = {a.space for a in archs if isinstance(a, Arch)}
    if len(spaces) != 1 or not all(isinstance(a, Arch) for a in archs):
        raise HwnasError(
            "the per-device regressor reads architectures of one search space; use a meta "
            "predictor (--predictor <space>) for ONNX models"
        )
    fz = get_featurizer(spaces.pop())
    return np.concatenate(
        [fz.encoding(archs), fz.structural(archs), np.log1p(fz.graph(archs) / 1e6)], 1
    )


class DeviceRegressor(Predictor):
    """Extremely randomised trees (Geurts et al., Machine Learning 2006) on log values.

    Args:
        n_estimators: trees.
        seed: random state.
    """

    name = "regressor"

    def __init__(self, n_estimators: int = 100, seed: int = 0):
        from sklearn.ensemble import ExtraTreesRegressor

        self.model = ExtraTreesRegressor(
            n_estimators=n_estimators,
            min_samples_leaf=2,
            max_features=0.5,
            random_state=seed,
            n_jobs=1,
        )
        self._space: str | None = None
        self._fitted = False

    def fit(self, archs: Sequence[Model], values, metric: str = "latency_ms") -> DeviceRegressor:
        archs = list(archs)
        v = check_calibration(archs, values)
        x = _features(archs)
        self._space = archs[0].space
        self.model.fit(x, np.log(v))
        self.metric = metric
        self._fitted = True
        return self

    def predict(self, archs: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
        if not self._fitted:
            raise HwnasError("the per-device regressor must be fitted before predicting")
        archs = list(archs)
        if any(isinstance(a, Arch) and a.space != self._space for a in archs):
            raise HwnasError(f"the regressor was fitted on space '{self._space}'")
        x = _features(archs)
        per_tree = np.stack([t.predict(x) for t in self.model.estimators_])
        mean_log, std_log = per_tree.mean(0), per_tree.std(0)
        mean = np.exp(mean_log)
        return mean, mean * std_log
