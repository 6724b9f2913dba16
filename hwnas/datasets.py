"""Image-classification data for supernet training: real data only, never downloaded.

Three sources, chosen by :func:`load_data`'s ``spec``:

- ``digits``: scikit-learn's bundled handwritten digits (1,797 8x8 grayscale images, 10
  classes; Alpaydin & Kaynak, UCI). Pixel values 0..16 are scaled to [0, 1], the images are
  upsampled (bilinear) to ``image_size`` and repeated to 3 channels so that the search spaces'
  RGB stems apply unchanged (kept gray for networks that take 1 channel).
- a CIFAR-10/100 folder in the standard python-pickle layout (``cifar-10-batches-py`` with
  ``data_batch_1..5``/``test_batch``, or ``cifar-100-python`` with ``train``/``test``).
- a class-per-folder image directory (``PATH/<class>/<image>``, any format PIL reads), resized
  to ``image_size`` x ``image_size`` RGB (grayscale, PIL's mode ``L``, for networks that take 1
  channel).

The images have the channel count the networks take (``channels``: 3, or 1 for a space whose
input shape is (1, H, W)); CIFAR's RGB images become gray by ITU-R 601-2 luma, as PIL's
``convert("L")`` and torchvision's ``Grayscale`` do.

Every source is split into train / validation / test by a fixed seed (CIFAR keeps its own test
set). The bilevel strategies (DARTS, GDAS, FBNet, ProxylessNAS) train weights on ``train`` and
architecture parameters on ``val``; accuracies reported for derived networks are on ``test``.
Images are normalised per channel with the training split's mean and standard deviation.
"""

from __future__ import annotations

import os
import pickle
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import HwnasError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".ppm", ".webp")


@dataclass
class Split:
    """Images and labels of one split.

    Attributes:
        x: float32 images, shape (N, C, H, W) (C 3, or 1 for gray data), normalised.
        y: int64 labels, shape (N,).
    """

    x: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)


@dataclass
class DataSplits:
    """A dataset split for search.

    Attributes:
        name: "digits", "cifar10", "cifar100" or the image folder's name.
        source: where it was read from (a file path, or "sklearn.datasets.load_digits").
        num_classes: number of classes.
        classes: class names in label order.
        train: weights are trained on it.
        val: architecture parameters are trained (bilevel) and subnets ranked on it.
        test: held-out accuracy of derived networks.
        seed: the split seed.
        own_test: whether ``test`` is the data's own test set (CIFAR's test batch), kept apart
            from the images ``train`` and ``val`` are split from; else it is split from them.
        notes: extra facts for :meth:`describe` (how digits are adapted).
        preprocessing: how a raw image becomes a network input, as model cards state it:
            ``channel_order``, ``layout``, ``size`` [H, W], ``scale`` (raw pixel -> [0, 1]),
            ``resize``, ``mean`` and ``std`` (per input channel, of the training split after
            scaling), ``steps`` (the same in words).
    """

    name: str
    source: str
    num_classes: int
    classes: list[str]
    train: Split
    val: Split
    test: Split
    seed: int
    own_test: bool = False
    notes: dict[str, str] = field(default_factory=dict)
    preprocessing: dict[str, object] = field(default_factory=dict)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of one image."""
        return tuple(self.train.x.shape[1:])  # type: ignore[return-value]

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "source": self.source,
            "num_classes": self.num_classes,
            "image_shape": list(self.image_shape),
            "split_seed": self.seed,
            "sizes": {"train": len(self.train), "val": len(self.val), "test": len(self.test)},
            **self.notes,
        }


def check_input_shape(
    data: DataSplits, shape: tuple[int, ...], space: str, exact: bool = True
) -> None:
    """Refuse data whose inputs the space's networks cannot take.

    Args:
        data: the loaded splits (images, (N, C, H, W)).
        shape: the space's input shape without the batch axis ((C, H, W), (C, L), (F,)).
        space: the space's name (for the message).
        exact: the whole shape must match; else only the rank and the channel count (a
            supernet trains on proxy images of another side).

    Raises:
        HwnasError: one line naming both shapes.
    """
    got = tuple(int(d) for d in data.train.x.shape[1:])
    shape = tuple(int(d) for d in shape)
    same = got == shape if exact else (len(got) == len(shape) and got[:1] == shape[:1])
    if not same:
        kind = "images" if len(got) == 3 else "inputs"
        raise HwnasError(
            f"--data {data.name}: its {kind} are {got}, but the networks of space '{space}' "
            f"take {shape}: give data of that shape"
        )


def input_channels(shape: tuple[int, ...]) -> int:
    """The image channels :func:`load_data` should hand networks of input ``shape`` ((C, H, W)
    without the batch axis): 1 for (1, H, W), else 3 (other shapes are refused by
    :func:`check_input_shape`)."""
    return 1 if len(shape) == 3 and int(shape[0]) == 1 else 3


def check_data(spec: str) -> None:
    """Refuse a ``--data`` value that is neither ``digits`` nor a folder, before anything
    is read (:func:`load_data` reads it; ``hwnas search`` checks it before a ``FILE.py:ATTR``
    space is imported).

    Raises:
        HwnasError: no such folder (with a did-you-mean for a misspelt ``digits``), or a file.
    """
    if spec == "digits":
        return
    path = Path(spec).expanduser()
    if not path.exists():
        import difflib

        close = difflib.get_close_matches(str(spec).lower(), ["digits"], n=1, cutoff=0.6)
        hint = " (did you mean digits?)" if close and "/" not in str(spec) else ""
        raise HwnasError(
            f"--data '{spec}' is neither 'digits' nor an existing folder "
            f"(CIFAR python-pickle folder or class-per-folder images){hint}"
        )
    if not path.is_dir():
        raise HwnasError(f"--data '{spec}' must be a folder")


def load_data(
    spec: str,
    seed: int = 0,
    image_size: int = 16,
    fractions: tuple[float, float] = (0.2, 0.2),
    limit: int | None = None,
    channels: int = 3,
) -> DataSplits:
    """Load and split a dataset.

    Args:
        spec: ``digits``, or a path to a CIFAR pickle folder or a class-per-folder directory.
        seed: split seed (the same seed gives the same split).
        image_size: side length of the images handed out (digits and image folders; CIFAR
            keeps 32).
        fractions: (validation, test) fractions of the data (for CIFAR: validation fraction of
            its training set; its own test set is kept).
        limit: keep at most this many images in total before splitting (quick runs, tests).
        channels: 3 (RGB; gray digits repeated) or 1 (gray: image folders read as PIL mode
            ``L``, CIFAR converted by luma); :func:`input_channels` gives it for a space.

    Returns:
        The normalised :class:`DataSplits`.

    Raises:
        HwnasError: an unknown name, a missing folder, or a folder with no readable images.
        ValueError: ``channels`` other than 1 or 3.
    """
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, not {channels!r}")
    check_data(spec)
    if spec == "digits":
        x, y, classes, source = _digits()
        name, test = "digits", None
    else:
        path = Path(spec).expanduser()
        cifar = _cifar(path)
        if cifar is not None:
            name, x, y, test, classes = cifar
            image_size = 32
            if channels == 1:
                x, test = _luma(x), (_luma(test[0]), test[1])
        else:
            x, y, classes = _image_folder(path, image_size, channels)
            name, test = path.name, None
        source = str(path)
    rng = np.random.default_rng(seed)
    if limit is not None and len(y) > limit:
        keep = np.sort(rng.permutation(len(y))[:limit])
        x, y = x[keep], y[keep]
    order = rng.permutation(len(y))
    n_val = max(1, int(round(fractions[0] * len(y))))
    if test is None:
        n_test = max(1, int(round(fractions[1] * len(y))))
        test_idx, val_idx, train_idx = (
            order[:n_test],
            order[n_test : n_test + n_val],
            order[n_test + n_val :],
        )
        tx, ty = x[test_idx], y[test_idx]
    else:
        val_idx, train_idx = order[:n_val], order[n_val:]
        tx, ty = test
        if limit is not None and len(ty) > limit // 4:
            tx, ty = tx[: limit // 4], ty[: limit // 4]
    if len(train_idx) < 2:
        raise HwnasError(f"--data '{spec}' has too few images ({len(y)}) to split")
    xtr = x[train_idx]
    prep = _Preprocess(xtr, image_size if name == "digits" else None, channels)
    splits = DataSplits(
        name=name,
        source=source,
        num_classes=len(classes),
        classes=classes,
        train=Split(prep(xtr), y[train_idx].astype(np.int64)),
        val=Split(prep(x[val_idx]), y[val_idx].astype(np.int64)),
        test=Split(prep(tx), ty.astype(np.int64)),
        seed=seed,
        own_test=test is not None,
    )
    if name == "digits":
        splits.notes["adaptation"] = (
            f"8x8 grayscale scaled to [0,1], bilinear upsampling to {image_size}x{image_size}"
            + (", repeated to 3 channels" if channels == 3 else ", 1 channel")
        )
    splits.preprocessing = prep.describe(name, splits.image_shape)
    return splits


class _Preprocess:
    """(N, C, H, W) float images in [0, 1] -> resized (digits), gray repeated to ``channels``
    and normalised float32."""

    def __init__(self, train: np.ndarray, digits_size: int | None, channels: int = 3):
        self.size = digits_size
        self.channels = channels
        x = self._resize(train)
        self.mean = x.mean(axis=(0, 2, 3), keepdims=True)
        self.std = x.std(axis=(0, 2, 3), keepdims=True) + 1e-6

    def _resize(self, x: np.ndarray) -> np.ndarray:
        if self.size is None or x.shape[-1] == self.size:
            return x
        import torch
        import torch.nn.functional as F

        t = F.interpolate(
            torch.from_numpy(x), size=(self.size, self.size), mode="bilinear", align_corners=False
        )
        return t.numpy()

    def _stats(self, channels: int) -> tuple[np.ndarray, np.ndarray]:
        if self.mean.shape[1] == 1 and channels == 3:  # grayscale repeated to RGB
            return np.repeat(self.mean, 3, axis=1), np.repeat(self.std, 3, axis=1)
        return self.mean, self.std

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = self._resize(x)
        if x.shape[1] == 1 and self.channels == 3:
            x = np.repeat(x, 3, axis=1)
        mean, std = self._stats(x.shape[1])
        return ((x - mean) / std).astype(np.float32)

    def describe(self, name: str, image_shape: tuple[int, ...]) -> dict[str, object]:
        """The preprocessing as a model card states it (see :class:`DataSplits`)."""
        mean, std = self._stats(int(image_shape[0]))
        size = [int(image_shape[1]), int(image_shape[2])]
        mean_l = [round(float(v), 6) for v in mean.reshape(-1)]
        std_l = [round(float(v), 6) for v in std.reshape(-1)]
        gray = int(image_shape[0]) == 1
        if name == "digits":
            scale = "pixel / 16 (digits are 0..16)"
            order = "gray" if gray else "gray repeated to RGB"
            resize = f"bilinear 8x8 -> {size[0]}x{size[1]} (torch, align_corners=False)"
            steps = [scale, resize] + ([] if gray else ["repeat the gray channel 3 times"])
        elif name in ("cifar10", "cifar100"):
            scale, order, resize = "pixel / 255", "gray" if gray else "RGB", "none (32x32 images)"
            steps = [scale] + (["gray = 0.299 R + 0.587 G + 0.114 B (ITU-R 601-2)"] if gray else [])
        else:
            scale, order = "pixel / 255", "gray" if gray else "RGB"
            resize = f"PIL bilinear to {size[0]}x{size[1]}"
            steps = ["convert to L (gray)" if gray else "convert to RGB", resize, scale]
        steps += ["(x - mean) / std per channel", "float32, NCHW"]
        return {
            "layout": "NCHW",
            "channel_order": order,
            "size": size,
            "scale": scale,
            "resize": resize,
            "mean": mean_l,
            "std": std_l,
            "steps": steps,
        }


def _digits() -> tuple[np.ndarray, np.ndarray, list[str], str]:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    return x, d.target.astype(np.int64), [str(c) for c in d.target_names], "sklearn:load_digits"


class _Refused(pickle.UnpicklingError):
    """What a CIFAR batch must not hold (its message names it)."""


NUMBER_KINDS = "biufc"
"""The dtype kinds a CIFAR batch's arrays and scalars may have: booleans and numbers."""


def _numpy_globals(limit: int) -> dict[tuple[str, str], object]:
    """The callables a CIFAR pickle names, by (module, name): how numpy 1 (the files as
    published, written by Python 2) and numpy 2 rebuild arrays, their dtypes and scalars,
    each bounded by ``limit``, the file's size in bytes.

    An array is rebuilt the way numpy pickles one (``_reconstruct(ndarray, (0,), 'b')``: an
    empty array, then its ``__setstate__`` with the data; ``_frombuffer`` of its data under
    pickle protocol 5), never by calling ``numpy.ndarray``, which allocates whatever shape it
    is given (a 190-byte pickle asked for 7 GB). The bytes of all the arrays and scalars
    rebuilt cannot exceed ``limit``: their data is in the file."""
    try:
        from numpy._core import multiarray, numeric
    except ImportError:  # numpy 1
        from numpy.core import multiarray, numeric

    budget = [limit]

    def spend(nbytes: int, what: str) -> None:
        if nbytes > budget[0]:
            raise _Refused(f"{what} of {nbytes} bytes, more than the file's {limit}")
        budget[0] -= nbytes

    def numbers(d) -> np.dtype:
        if not isinstance(d, np.dtype):
            raise _Refused(f"an array of {type(d).__name__}")
        if d.hasobject:
            raise _Refused("an array of Python objects")
        if d.kind not in NUMBER_KINDS or d.fields is not None or d.subdtype is not None:
            raise _Refused(f"an array of dtype {str(d)[:40]}")
        return d

    def dtype(*args):  # an array of Python objects would unpickle each item as an object
        return numbers(np.dtype(*args))

    class Array(np.ndarray):
        """What ``_reconstruct`` makes: its ``__setstate__`` checks the data is in the file
        before numpy allocates the array."""

        def __setstate__(self, state):
            if not isinstance(state, tuple) or len(state) not in (4, 5):
                raise _Refused("an array state numpy does not write")
            shape, d, _fortran, raw = state[-4:]
            if not isinstance(shape, tuple) or not all(type(n) is int and n >= 0 for n in shape):
                raise _Refused("an array shape of other than counts")
            count = 1
            for n in shape:
                count *= n
            nbytes = count * numbers(d).itemsize
            if not isinstance(raw, (bytes, bytearray, str)) or len(raw) != nbytes:
                raise _Refused(f"an array of shape {shape[:8]} without its {nbytes} bytes")
            spend(nbytes, "arrays")
            super().__setstate__(state)

    class Ndarray:
        """``numpy.ndarray`` as ``_reconstruct``'s first argument, never to be called."""

        def __call__(self, *args, **kwargs):
            raise _Refused("a call of numpy.ndarray (an array not rebuilt from its data)")

    ndarray = Ndarray()

    def reconstruct(subtype, shape, typecode):
        if subtype is not ndarray or not isinstance(shape, tuple) or 0 not in shape:
            raise _Refused("an array rebuilt otherwise than numpy pickles one")
        return multiarray._reconstruct(Array, (0,), b"b")

    def frombuffer(buf, d, shape, order):
        if not isinstance(buf, (bytes, bytearray)):
            raise _Refused(f"an array of a {type(buf).__name__} buffer")
        spend(len(buf), "arrays")
        return numeric._frombuffer(buf, numbers(d), shape, order)

    def scalar(d, data=None):
        if not isinstance(data, (bytes, str)) or len(data) != numbers(d).itemsize:
            raise _Refused("a numpy scalar without its bytes")
        spend(len(data), "scalars")
        return multiarray.scalar(d, data)

    def latin1(text, encoding="utf-8"):  # bytes pickled by Python 3 at protocol 2
        if str(encoding).lower().replace("_", "-") not in ("latin1", "latin-1"):
            raise _Refused(f"_codecs.encode to {encoding}")
        return text.encode("latin1")

    out: dict[tuple[str, str], object] = {
        ("numpy", "ndarray"): ndarray,
        ("numpy", "dtype"): dtype,
        ("_codecs", "encode"): latin1,
    }
    for module in ("numpy.core", "numpy._core"):
        out[(f"{module}.multiarray", "_reconstruct")] = reconstruct
        out[(f"{module}.multiarray", "scalar")] = scalar
        out[(f"{module}.numeric", "_frombuffer")] = frombuffer
    return out


class _CifarUnpickler(pickle._Unpickler):
    """Unpickles plain data only: dicts, lists, tuples, strings, bytes, numbers (pickle's own
    opcodes) and numpy arrays of numbers whose bytes are in the file (``limit``: its size);
    any other global (a function, a class: what makes a pickle run code) is refused.

    Python's own unpickler, not the C one: the C unpickler sizes its memo by the largest index
    a pickle names (a 9-byte pickle, ``LONG_BINPUT 2**28``, took 4 GB), Python's keeps a dict
    of the indices used; it reads a CIFAR batch as fast (the data is one string)."""

    def __init__(self, fh, limit: int, **kwargs):
        super().__init__(fh, **kwargs)
        self.allowed = _numpy_globals(limit)

    def find_class(self, module: str, name: str):
        found = self.allowed.get((module, name))
        if found is None:
            raise _Refused(f"{module}.{name}")
        return found


def _unpickle(path: Path) -> dict:
    """A CIFAR batch file through :class:`_CifarUnpickler`.

    Raises:
        HwnasError: unreadable, truncated, or holding anything but plain data (one line).
    """
    try:
        with open(path, "rb") as fh:
            limit = os.fstat(fh.fileno()).st_size
            data = _CifarUnpickler(fh, limit, encoding="latin1").load()
    except _Refused as exc:
        raise HwnasError(
            f"cannot read CIFAR batch {path}: it holds {exc}, which a CIFAR batch does not "
            "(refused: unpickling it could run code or exhaust the memory); only dicts, lists, "
            "strings, numbers and numpy arrays of numbers whose data is in the file are read"
        ) from None
    except Exception as exc:  # truncated or foreign files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HwnasError(f"cannot read CIFAR batch {path}: {first}") from None
    if not isinstance(data, dict):
        raise HwnasError(f"cannot read CIFAR batch {path}: not a dict (a {type(data).__name__})")
    return {k: v.view(np.ndarray) if isinstance(v, np.ndarray) else v for k, v in data.items()}


def _cifar_images(batch: dict, path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        x = np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        labels = np.asarray(batch.get("labels", batch.get("fine_labels")), dtype=np.int64)
    except (KeyError, TypeError, ValueError) as exc:
        raise HwnasError(f"{path} is not a CIFAR batch: {exc}") from None
    if labels.shape != (len(x),):
        raise HwnasError(f"{path} is not a CIFAR batch: {len(x)} images, {labels.size} labels")
    return x.astype(np.float32) / 255.0, labels


CIFAR10_FILES = ("test_batch", "batches.meta")
CIFAR100_FILES = ("train", "test", "meta")


def _cifar_layout(path: Path) -> tuple[Path, tuple[str, ...]] | None:
    """(the folder, the names of its files besides ``data_batch_*``) of a CIFAR-10 or
    CIFAR-100 pickle layout in ``path`` or its standard sub-folder, else None."""
    for sub in (path, path / "cifar-10-batches-py", path / "cifar-100-python"):
        if (sub / "data_batch_1").is_file() and (sub / "test_batch").is_file():
            return sub, CIFAR10_FILES
        if (sub / "train").is_file() and (sub / "test").is_file():
            return sub, CIFAR100_FILES
    return None


def _cifar(path: Path):
    """(name, x, y, (test_x, test_y), classes) for a CIFAR pickle folder, else None."""
    layout = _cifar_layout(path)
    if layout is None:
        return None
    sub, names = layout
    if names == CIFAR10_FILES:
        parts = [_cifar_images(_unpickle(p), p) for p in sorted(sub.glob("data_batch_*"))]
        x = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        test = _cifar_images(_unpickle(sub / "test_batch"), sub / "test_batch")
        meta = sub / "batches.meta"
        classes = (
            list(_unpickle(meta)["label_names"]) if meta.is_file() else [str(i) for i in range(10)]
        )
        return "cifar10", x, y, test, classes
    x, y = _cifar_images(_unpickle(sub / "train"), sub / "train")
    test = _cifar_images(_unpickle(sub / "test"), sub / "test")
    meta = sub / "meta"
    classes = (
        list(_unpickle(meta)["fine_label_names"])
        if meta.is_file()
        else [str(i) for i in range(100)]
    )
    return "cifar100", x, y, test, classes


def _luma(x: np.ndarray) -> np.ndarray:
    """(N, 3, H, W) RGB in [0, 1] -> (N, 1, H, W) gray by ITU-R 601-2 luma (PIL's ``L``)."""
    w = np.asarray([0.299, 0.587, 0.114], dtype=x.dtype).reshape(1, 3, 1, 1)
    return (x * w).sum(axis=1, keepdims=True)


def _image_folder(
    path: Path, size: int, channels: int = 3
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    from PIL import Image

    mode = "L" if channels == 1 else "RGB"
    classes = sorted(p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    if len(classes) < 2:
        raise HwnasError(
            f"--data folder {path} needs one sub-folder per class (found {len(classes)}), "
            "or the CIFAR python-pickle files"
        )
    xs, ys = [], []
    for label, cls in enumerate(classes):
        for f in sorted((path / cls).iterdir()):
            if f.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            try:
                # a header claiming more pixels than Pillow's limit (a small PNG of 20000x20000
                # would decode to 1.2 GB): Pillow raises its DecompressionBombError (no
                # OSError) above twice the limit and only warns above it; both are refused
                with warnings.catch_warnings():
                    warnings.simplefilter("error", Image.DecompressionBombWarning)
                    with Image.open(f) as im:
                        im = im.convert(mode).resize((size, size), Image.BILINEAR)
                a = np.asarray(im, dtype=np.float32) / 255.0
                xs.append(a[None] if a.ndim == 2 else a.transpose(2, 0, 1))
            except (OSError, Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
                raise HwnasError(f"cannot read image {f}: {exc}") from None
            ys.append(label)
    if not xs:
        raise HwnasError(f"--data folder {path} has no readable images in its class folders")
    empty = [c for i, c in enumerate(classes) if i not in set(ys)]
    if empty:  # an output class nothing teaches, and chance counted against it
        raise HwnasError(
            f"--data folder {path}: class folder(s) {', '.join(empty)} hold no image "
            f"({', '.join(sorted(IMAGE_SUFFIXES))}); remove them or add images"
        )
    return np.stack(xs), np.asarray(ys, dtype=np.int64), classes


# -- chance level ------------------------------------------------------------------------------

CHANCE_FACTOR = 1.5
"""A model whose top-1 accuracy is at most this many times chance (100 / classes %) is
chance-level. On NAS-Bench-201 the 341 cells with no path from input to output sit exactly at
chance (1.00% on CIFAR-100, 10% on CIFAR-10) and the next cell scores 5x chance: any factor
between 1 and 5 separates them."""


def chance_accuracy(num_classes: int) -> float:
    """Top-1 accuracy (%) of guessing: 100 / ``num_classes``."""
    return 100.0 / max(1, num_classes)


def is_chance_level(accuracy: float, num_classes: int) -> bool:
    """Whether ``accuracy`` (%) is at or near chance (see :data:`CHANCE_FACTOR`)."""
    return accuracy <= CHANCE_FACTOR * chance_accuracy(num_classes) + 1e-9


def chance_verdict(accuracy: dict[str, Any], num_classes: int) -> dict[str, Any]:
    """Whether a model is chance-level, judged on the accuracy its search chose it on:
    ``accuracy``'s ``chosen_on`` where it has one (a fine-tuned supernet subnet: its validation
    accuracy, with its test accuracy as ``value``), else ``accuracy`` itself. The one rule of
    ``pareto.csv``'s ``chance_level`` column and the zoo's export
    (:func:`hwnas.zoo.write.zoo_columns`, :func:`hwnas.zoo.write.write_zoo`: a record's
    accuracy, the one it was chosen on) and of a zoo card's ``chance_level``: a subnet exported
    for its 18.33% validation accuracy had a card calling it chance-level by its test accuracy.

    Args:
        accuracy: ``{"value": %, "split": ...}`` (a card's ``accuracy`` section, or a record's
            accuracy as ``{"value": r.accuracy}``).
        num_classes: classes of the data (chance is 100 / num_classes %).

    Returns:
        A card's ``chance_level`` section: ``value`` (bool), ``judged`` (the accuracy judged,
        and its ``split`` where it has one), ``chance_accuracy`` and ``rule``.
    """
    chosen = accuracy.get("chosen_on")
    judged = chosen if isinstance(chosen, dict) else accuracy
    value = float(judged["value"])
    return {
        "value": is_chance_level(value, num_classes),
        "judged": {"value": value, **({"split": judged["split"]} if judged.get("split") else {})},
        "chance_accuracy": round(chance_accuracy(num_classes), 4),
        "rule": f"accuracy <= {CHANCE_FACTOR:g} x 100/num_classes %",
    }


def chance_best_reason(limit: str | None, weight: str | None = None) -> str:
    """Why a search's chance-level ``best`` is still its answer, for a warning: ``limit`` names
    the latency limit as its user gave it (``--max-latency 0.1``, ``max_latency=0.1``), None
    without one; ``weight`` a supernet search's hardware-term weight as given
    (``--latency-weight 0.5``), None without one (a weight pulls every decision toward its
    cheapest candidate: DARTS at 0.5 on NAS-Bench-201 derived a cell of ``none`` edges)."""
    if limit is not None:
        return f"no architecture within {limit} ms does better; loosen it"
    if weight is not None:
        return (
            f"no architecture of the front does better (a hardware term that outweighs "
            f"accuracy, {weight}, pulls every decision to its cheapest candidate: lower it or "
            "give a latency target; too few epochs leave every candidate untrained)"
        )
    return "no architecture of the front does better"


# -- identity ----------------------------------------------------------------------------------


def data_name(spec: str) -> str:
    """The name :func:`load_data` gives the data ``spec`` names (its ``DataSplits.name``),
    without reading it: ``digits``, ``cifar10`` or ``cifar100`` for a CIFAR pickle folder, else
    the folder's name."""
    if spec == "digits":
        return spec
    path = Path(spec).expanduser()
    layout = _cifar_layout(path) if path.is_dir() else None
    if layout is not None:
        return "cifar10" if layout[1] == CIFAR10_FILES else "cifar100"
    return path.name


def data_identity(spec: str) -> str:
    """What ``--data`` names, for a study's name: ``digits`` itself; a folder by its name and
    a digest of the files :func:`load_data` reads from it (the CIFAR pickles, or each class
    folder's images: relative path, size and content), so that two folders called ``imgs``
    holding other images are two studies (the second resumed the first's, its accuracies
    measured on other data) while the same files copied elsewhere, or beside notes the loader
    skips, are one. A path that is not a folder is its name alone (the load says why).

    Returns:
        ``NAME`` or ``NAME-dXXXXXXXX`` (8 hex digits of a SHA-256).
    """
    if spec == "digits":
        return spec
    path = Path(spec).expanduser()
    if not path.is_dir():
        return path.name
    files = _data_files(path)
    stamp = []
    for f in files:
        try:
            st = f.stat()
            stamp.append((str(f), st.st_size, st.st_mtime_ns))
        except OSError:
            stamp.append((str(f), -1, -1))
    return _content_identity(path, tuple(files), tuple(stamp))


@lru_cache(maxsize=8)
def _content_identity(path: Path, files: tuple[Path, ...], stamp: tuple) -> str:
    """:func:`data_identity` of a folder's ``files``, read once per process for the same files
    (``stamp``: each one's path, size and modification time; a search asks for it up to three
    times: its study's name, the stored study's check, the study it opens), a CIFAR folder is
    180 MB."""
    import hashlib

    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.relative_to(path).as_posix()}\0".encode())
        try:
            with open(f, "rb") as fh:  # the loader reads every byte of them too
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError:  # unreadable: the load names it
            digest.update(b"\0unreadable")
        digest.update(b"\n")
    return f"{path.name}-d{digest.hexdigest()[:8]}"


def _data_files(path: Path) -> list[Path]:
    """The files :func:`load_data` reads from the folder ``path``, in order: a CIFAR layout's
    pickles (:func:`_cifar_layout`), else each class folder's images (links followed, as the
    loader follows them)."""
    layout = _cifar_layout(path)
    if layout is not None:
        sub, names = layout
        batches = names == CIFAR10_FILES
        return [
            p
            for p in sorted(sub.iterdir())
            if p.name in names or (batches and p.name.startswith("data_batch_"))
        ]
    files = []
    for cls in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files += [f for f in sorted(cls.iterdir()) if f.suffix.lower() in IMAGE_SUFFIXES]
    return files
