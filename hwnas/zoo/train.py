"""Training a space's architecture from scratch for the zoo, with the space's recipe.

:class:`ZooTrainer` loads the data once (user errors surface before any work), then trains
architectures one by one with the space's paper recipe (:mod:`hwnas.zoo.recipes`) on the
training + validation splits of :func:`hwnas.datasets.load_data`, re-estimates batch-norm
statistics, and measures top-1 accuracy on the held-out test split. Every deviation from the
recipe is recorded in the card's ``training`` section. Trained weights are kept in a cache in
the hwnas home keyed by everything that determines them, so a rerun (a killed search resumed,
``hwnas train`` on the same zoo) does not train twice.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import pickle
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas import jsonfile
from hwnas.errors import HwnasError
from hwnas.export import content_hash
from hwnas.paths import hwnas_home
from hwnas.spaces.base import Arch, SearchSpace
from hwnas.zoo.recipes import Recipe, recipe_for

if TYPE_CHECKING:  # pragma: no cover
    from hwnas.datasets import DataSplits

CPU_EPOCHS = 5
"""Default epochs when no CUDA GPU is present (the recipes' 180-360 epochs take days on a
CPU): on digits, NAS-Bench-201 cells reach 85-99% test accuracy in 5 epochs. Give ``--epochs``
for more (the recipe's count for the full schedule); the card records the shortening."""


@dataclass
class TrainSettings:
    """What ``hwnas train`` / ``--train-zoo`` were asked for (None: the recipe's value).

    Attributes:
        data: ``digits`` or a folder (CIFAR pickle folder, or class-per-folder images).
        epochs: training epochs (None: the recipe's on a GPU, :data:`CPU_EPOCHS` on a CPU).
        batch_size: mini-batch size (None: the recipe's); the learning rate is scaled linearly.
        lr: initial learning rate (None: the recipe's, scaled to the batch size).
        seed: weight-initialisation and shuffling seed (the data split seed is ``data_seed``).
        data_seed: seed of the train / validation / test split.
        limit: use at most this many images (quick runs, tests).
        torch_device: ``cpu`` or ``cuda`` (None: cuda when available).
        threads: torch CPU threads. One by default, as supernet searches: on a CPU shared
            with other processes, two threads ran these small convolutions 2-5x slower than
            one (contention spins), and on a quiet machine one thread per model is a fair
            default.
    """

    data: str = "digits"
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    seed: int = 0
    data_seed: int = 0
    limit: int | None = None
    torch_device: str | None = None
    threads: int = 1

    def check(self) -> None:
        """Raises HwnasError: an out-of-range number (one line, before any work)."""
        from hwnas.limits import (
            MAX_BATCH_SIZE,
            MAX_EPOCHS,
            MAX_LEARNING_RATE,
            MAX_THREADS,
            bounded,
        )

        if self.epochs is not None and self.epochs < 1:
            raise HwnasError(f"--epochs must be at least 1, got {self.epochs}")
        if self.epochs is not None:
            bounded("--epochs", self.epochs, 1, MAX_EPOCHS, integer=True)
        if self.batch_size is not None and self.batch_size < 2:
            raise HwnasError(f"--batch-size must be at least 2, got {self.batch_size}")
        if self.batch_size is not None:
            bounded("--batch-size", self.batch_size, 2, MAX_BATCH_SIZE, integer=True)
        if self.lr is not None and not self.lr > 0:
            raise HwnasError(f"--lr must be positive, got {self.lr}")
        if self.lr is not None:
            bounded("--lr", self.lr, 0, MAX_LEARNING_RATE, low_open=True)
        if self.limit is not None and self.limit < 10:
            raise HwnasError(f"--limit must be at least 10 images, got {self.limit}")
        if self.threads < 1:
            raise HwnasError(f"--threads must be at least 1, got {self.threads}")
        bounded("--threads", self.threads, 1, MAX_THREADS, integer=True)
        if self.torch_device not in (None, "cpu", "cuda"):
            raise HwnasError(f"torch device must be cpu or cuda, got '{self.torch_device}'")


@dataclass
class TrainedModel:
    """An architecture trained for the zoo.

    Attributes:
        model: the network, eval mode, on the CPU.
        input_shape: (1, C, H, W) it takes.
        accuracy: top-1 accuracy (%) on the test split.
        accuracy_source: where ``accuracy`` comes from (data, split, size).
        training: the card's ``training`` section (recipe, applied settings, deviations,
            data, per-epoch loss and seconds, the cache key).
        test_input: one preprocessed test image, shape ``input_shape``.
        test_label: its label.
        reused: the weights came from the training cache.
    """

    model: Any
    input_shape: tuple[int, ...]
    accuracy: float
    accuracy_source: str
    training: dict[str, Any]
    test_input: np.ndarray
    test_label: int
    reused: bool = False


@dataclass
class ZooTrainer:
    """Trains architectures of one space on one dataset for the zoo.

    Build it with :meth:`prepare`. ``log`` receives one line per epoch and per model.
    """

    settings: TrainSettings
    space: SearchSpace
    dataset: str
    recipe: Recipe
    data: DataSplits
    torch_device: str
    log: Callable[[str], None] = field(default=lambda _m: None)

    @classmethod
    def prepare(
        cls,
        settings: TrainSettings,
        space: SearchSpace,
        dataset: str,
        log: Callable[[str], None] | None = None,
    ) -> ZooTrainer:
        """Check the settings and load the data, before any search or training.

        Args:
            settings: what was asked.
            space: the architectures' space (its recipe is used).
            dataset: the space's dataset whose network is trained (input shape; its
                classifier is resized to the data's classes).
            log: progress lines.

        Raises:
            HwnasError: bad settings, unreadable data.
        """
        settings.check()
        recipe = recipe_for(space.name)
        spec = space.dataset(dataset)
        from hwnas.datasets import check_input_shape, input_channels, load_data

        data = load_data(
            settings.data, seed=settings.data_seed, image_size=spec.input_shape[-1],
            limit=settings.limit, channels=input_channels(spec.input_shape),
        )  # fmt: skip
        check_input_shape(data, spec.input_shape, space.name)
        device = settings.torch_device or _default_device()
        if device == "cuda" and not _cuda_available():
            raise HwnasError("torch device cuda was asked for, but torch sees no CUDA GPU")
        return cls(settings, space, dataset, recipe, data, device, log or (lambda _m: None))

    # -- what is applied -------------------------------------------------------------------

    @property
    def epochs(self) -> int:
        """Epochs applied: ``--epochs``, else the recipe's on a GPU, :data:`CPU_EPOCHS` on a
        CPU."""
        if self.settings.epochs is not None:
            return self.settings.epochs
        return self.recipe.epochs if self.torch_device == "cuda" else CPU_EPOCHS

    @property
    def batch_size(self) -> int:
        """Mini-batch size applied: ``--batch-size``, else the recipe's."""
        return self.settings.batch_size or self.recipe.batch_size

    @property
    def lr(self) -> float:
        """Initial learning rate applied: ``--lr``, else the recipe's scaled to the batch."""
        return self.settings.lr or self.recipe.lr_for(self.batch_size)

    def deviations(self, side: int) -> list[str]:
        """How this training differs from the recipe, one sentence each."""
        r, s, out = self.recipe, self.settings, []
        if self.epochs != r.epochs:
            why = "--epochs" if s.epochs is not None else (
                f"the default without a GPU ({CPU_EPOCHS}); --epochs {r.epochs} runs the recipe's"
            )  # fmt: skip
            out.append(f"{self.epochs} of the recipe's {r.epochs} epochs ({why})")
        if self.batch_size != r.batch_size:
            out.append(
                f"batch {self.batch_size} instead of {r.batch_size} (--batch-size)"
                + ("" if s.lr else f"; learning rate scaled linearly to {self.lr:g}")
            )
        if s.lr:
            out.append(f"learning rate {s.lr:g} (--lr) instead of {r.lr_for(self.batch_size):g}")
        if r.augmentation:
            out.append(f"no data augmentation (the recipe: {r.augmentation})")
        if self.data.name != self.dataset:
            out.append(
                f"trained on {self.data.name} ({self.data.num_classes} classes), not on "
                f"{self.dataset}: the classifier has {self.data.num_classes} outputs"
            )
        if self.data.image_shape[-1] != side:
            out.append(
                f"images resized from {self.data.image_shape[-1]} to {side} pixels (bilinear) "
                "for this network's input"
            )
        if s.limit:
            out.append(f"at most {s.limit} images in all (--limit)")
        out.append(
            "batch-norm statistics re-estimated on the training images after training "
            "(as Once-for-All does for its subnets)"
        )
        return out

    # -- training --------------------------------------------------------------------------

    def train(self, arch: Arch) -> TrainedModel:
        """Train ``arch`` from scratch (or take its weights from the training cache).

        Raises:
            HwnasError: an architecture of another space.
        """
        import torch

        from hwnas.loops import accuracy, merge, resized_forward

        if arch.space != self.space.name:
            raise HwnasError(f"architecture of space '{arch.space}' given to {self.space.name}")
        side = int(self.space.input_shape(arch, self.dataset)[-1])
        shape = (1, *self.space.input_shape(arch, self.dataset))
        key = self._key(arch, side)
        torch.manual_seed(self.settings.seed)
        model = self.space.build(arch, self.dataset, num_classes=self.data.num_classes)
        dev = torch.device(self.torch_device)
        cached = _load_cached(key)
        if cached is not None:
            state, training = cached
            model.load_state_dict(state)
            model = model.eval()
            reused = True
            self.log(f"  weights from the training cache ({key})")
        else:
            started = time.time()
            previous = torch.get_num_threads()
            torch.set_num_threads(self.settings.threads)
            try:
                # channels-last: oneDNN's (and cuDNN's) fast layout for these convolutions,
                # 2.5-3.5x faster per training step on this project's CPU than the default
                model = model.to(dev, memory_format=torch.channels_last)
                history = self._fit(model, merge(self.data.train, self.data.val), side, dev)
                _recalibrate(model, self.data.train, side, dev)
                acc = accuracy(resized_forward(model, side), self.data.test, device=dev)
            finally:
                torch.set_num_threads(previous)
            model = model.cpu().to(memory_format=torch.contiguous_format).eval()
            training = self._describe(side, history, time.time() - started, key, acc)
            _store_cached(key, model, training)
            reused = False
        x, label = self._test_image(side)
        acc = float(training["test_accuracy"])
        source = (
            f"measured:{self.data.name}:test split ({len(self.data.test)} images), trained "
            f"from scratch {_epochs(training['applied']['epochs'])} ({self.recipe.name} recipe)"
        )
        return TrainedModel(model, shape, acc, source, training, x, label, reused)

    def _fit(self, model, split, side: int, dev) -> list[dict[str, float]]:
        import torch
        import torch.nn.functional as F

        from hwnas.loops import batches

        r = self.recipe
        decay, no_decay = [], []
        for p in model.parameters():
            flat = p.ndim <= 1  # batch-norm weights and biases, linear/conv biases
            (no_decay if r.no_decay_bn_bias and flat else decay).append(p)
        groups = [{"params": decay, "weight_decay": r.weight_decay}]
        if no_decay:
            groups.append({"params": no_decay, "weight_decay": 0.0})
        opt = torch.optim.SGD(groups, lr=self.lr, momentum=r.momentum, nesterov=r.nesterov)
        per_epoch = max(1, len(split) // self.batch_size + (len(split) % self.batch_size >= 2))
        total, warm = self.epochs * per_epoch, r.warmup_epochs * per_epoch

        def factor(step: int) -> float:  # linear warm-up, then cosine to 0 (eta_min 0)
            if step < warm:
                return (step + 1) / warm
            return 0.5 * (1.0 + math.cos(math.pi * (step - warm) / max(1, total - warm)))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        rng = np.random.default_rng(self.settings.seed)
        history = []
        for epoch in range(self.epochs):
            model.train()
            t0, losses = time.time(), []
            for xb, yb in batches(split, self.batch_size, rng, dev):
                if xb.shape[-1] != side:
                    xb = F.interpolate(xb, size=(side, side), mode="bilinear", align_corners=False)
                xb = xb.contiguous(memory_format=torch.channels_last)
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(xb), yb, label_smoothing=r.label_smoothing)
                loss.backward()
                opt.step()
                sched.step()
                losses.append(loss.item())
            seconds = time.time() - t0
            history.append(
                {"epoch": epoch + 1, "loss": round(float(np.mean(losses)), 5),
                 "seconds": round(seconds, 2)}
            )  # fmt: skip
            mean = float(np.mean(losses))
            self.log(f"  epoch {epoch + 1}/{self.epochs}: loss {mean:.3f}, {seconds:.1f} s")
        return history

    def _describe(self, side: int, history, seconds: float, key: str, acc: float) -> dict:
        return {
            "recipe": self.recipe.describe(),
            "applied": {
                "epochs": self.epochs,
                "batch_size": self.batch_size,
                "lr": self.lr,
                "seed": self.settings.seed,
                "torch_device": self.torch_device,
                "threads": self.settings.threads,
                "input_side": side,
            },
            "deviations": self.deviations(side),
            "data": self.data.describe(),
            "history": history,
            "seconds": round(seconds, 2),
            "test_accuracy": acc,
            "cache_key": key,
        }

    def _test_image(self, side: int) -> tuple[np.ndarray, int]:
        x = self.data.test.x[:1]
        if x.shape[-1] != side:
            import torch
            import torch.nn.functional as F

            x = F.interpolate(
                torch.from_numpy(x), size=(side, side), mode="bilinear", align_corners=False
            ).numpy()
        return np.ascontiguousarray(x, dtype=np.float32), int(self.data.test.y[0])

    def preprocessing(self, side: int) -> dict[str, Any]:
        """The card's preprocessing for a network taking ``side`` x ``side`` images."""
        pre = dict(self.data.preprocessing)
        if self.data.image_shape[-1] != side:
            pre["steps"] = [
                *pre["steps"][:-2],
                f"bilinear resize to {side}x{side} (torch, align_corners=False)",
                *pre["steps"][-2:],
            ]
            pre["size"] = [side, side]
        pre["source"] = f"the training split of {self.data.name} ({len(self.data.train)} images)"
        return pre

    def _key(self, arch: Arch, side: int) -> str:
        """Everything that determines the trained weights and the test accuracy kept with
        them: every image and label of every split (a folder cleaned or relabelled in place
        is other data; a sample of 64 training images let the cache answer with weights and a
        test accuracy of the data before), and the space's fingerprint (an edited space file
        of the same name is another network)."""
        d = self.data
        images = hashlib.sha256()
        for split in (d.train, d.val, d.test):
            images.update(np.ascontiguousarray(split.x).tobytes())
            images.update(np.ascontiguousarray(split.y).tobytes())
        try:
            torch_version = metadata.version("torch")
        except metadata.PackageNotFoundError:  # pragma: no cover
            torch_version = "none"
        return content_hash(
            self.space.fingerprint, arch.text, self.dataset, str(d.num_classes), str(side),
            json.dumps(d.describe(), sort_keys=True, default=str), images.hexdigest(),
            json.dumps(self.recipe.describe(), sort_keys=True),
            f"{self.epochs}/{self.batch_size}/{self.lr!r}/{self.settings.seed}",
            "channels_last",
            self.torch_device, torch_version, "v1",
        )  # fmt: skip


def _epochs(n: int) -> str:
    return f"{n} epoch" if n == 1 else f"{n} epochs"


def _default_device() -> str:
    return "cuda" if _cuda_available() else "cpu"


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _recalibrate(model, split, side: int, dev) -> None:
    from hwnas.loops import recalibrate_bn, resized_forward

    recalibrate_bn(resized_forward(model, side), model, split, batch_size=256, max_batches=20,
                   device=dev)  # fmt: skip


def training_cache() -> Path:
    """``$HWNAS_HOME/cache/trained``: weights trained for the zoo, by training key."""
    return hwnas_home() / "cache" / "trained"


def _load_cached(key: str):
    import torch

    folder = training_cache() / key
    if not folder.is_dir():
        return None
    try:
        training = json.loads((folder / "training.json").read_text())
        blob = (folder / "weights.pt").read_bytes()
        # a damaged entry (a flipped bit still loads) is trained again, never put in a zoo
        if (folder / "weights.sha256").read_text().strip() != hashlib.sha256(blob).hexdigest():
            raise ValueError("weights.pt sha256 differs")
        state = torch.load(io.BytesIO(blob), weights_only=True)
    except (OSError, ValueError, RuntimeError, KeyError, pickle.UnpicklingError):
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return state, training


def _store_cached(key: str, model, training: dict) -> None:
    import torch

    root = training_cache()
    from hwnas.paths import sweep_temporaries, temporary

    tmp = temporary(root / key)
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(root)  # what killed writers left
        torch.save(model.state_dict(), tmp / "weights.pt")
        digest = hashlib.sha256((tmp / "weights.pt").read_bytes()).hexdigest()
        (tmp / "weights.sha256").write_text(digest + "\n")
        (tmp / "training.json").write_text(jsonfile.dumps(training, indent=1))
        os.rename(tmp, root / key)
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
