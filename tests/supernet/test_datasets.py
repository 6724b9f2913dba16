"""Data loading: digits split by seed, CIFAR pickle folders, class-per-folder images, errors."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from hwnas.datasets import load_data
from hwnas.errors import HwnasError


def test_digits_split_is_fixed_by_seed_and_disjoint():
    a = load_data("digits", seed=0, image_size=16)
    b = load_data("digits", seed=0, image_size=16)
    c = load_data("digits", seed=1, image_size=16)
    assert (len(a.train), len(a.val), len(a.test)) == (1079, 359, 359)
    assert a.image_shape == (3, 16, 16) and a.num_classes == 10
    assert np.array_equal(a.test.x, b.test.x) and not np.array_equal(a.test.x, c.test.x)
    assert abs(float(a.train.x.mean())) < 1e-3  # normalised with the training statistics
    rows = {r.tobytes() for r in a.train.x.reshape(len(a.train), -1)}
    assert not any(r.tobytes() in rows for r in a.test.x.reshape(len(a.test), -1)[:50])


def _cifar10_folder(root, n=20):
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in ("data_batch_1", "data_batch_2", "test_batch"):
        batch = {
            "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            "labels": list(rng.integers(0, 10, n)),
        }
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(
        pickle.dumps({"label_names": [f"c{i}" for i in range(10)]})
    )
    return root


def test_cifar_pickle_folder_keeps_its_test_set(tmp_path):
    d = load_data(str(_cifar10_folder(tmp_path)), seed=0)
    assert d.name == "cifar10" and d.image_shape == (3, 32, 32) and d.classes[0] == "c0"
    assert len(d.test) == 20 and len(d.train) + len(d.val) == 40 and d.own_test


def test_class_per_folder_images(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for cls in ("cat", "dog", "fox"):
        (tmp_path / cls).mkdir()
        for i in range(5):
            pixels = rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / cls / f"{i}.png")
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    d = load_data(str(tmp_path), seed=0, image_size=12)
    assert d.classes == ["cat", "dog", "fox"] and d.image_shape == (3, 12, 12)
    assert len(d.train) + len(d.val) + len(d.test) == 15 and not d.own_test


def test_bad_data_is_a_one_line_user_error(tmp_path):
    with pytest.raises(HwnasError, match="neither 'digits' nor an existing folder"):
        load_data(str(tmp_path / "missing"))
    (tmp_path / "only").mkdir()
    with pytest.raises(HwnasError, match="one sub-folder per class"):
        load_data(str(tmp_path))
    # a class folder with no image became an output class nothing taught, chance counted
    # against it (3 classes read as 4)
    from PIL import Image

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / cls / "0.png")
    with pytest.raises(HwnasError, match=r"class folder\(s\) only hold no image"):
        load_data(str(tmp_path))


def _png_header(width: int, height: int) -> bytes:
    """A 65-byte PNG whose header says ``width`` x ``height`` RGB pixels."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"")  # none: only the header is read
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("side", [20000, 10000], ids=["bomb-error", "bomb-warning"])
def test_an_image_claiming_a_huge_size_is_a_one_line_error(tmp_path, side):
    """A 65-byte PNG claiming 20000x20000 pixels in an image folder: Pillow's
    DecompressionBombError (no OSError) ended `hwnas train --data` in a traceback; one of
    10000x10000 (above Pillow's limit, below twice it: a warning) was decoded, 300 MB."""
    from helpers import hwnas_main
    from PIL import Image

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / cls / "0.png")
    (tmp_path / "b" / "huge.png").write_bytes(_png_header(side, side))
    r = hwnas_main("train", "5", "--data", tmp_path, "--epochs", "1", "--out", tmp_path / "z")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot read image {tmp_path / 'b' / 'huge.png'}: Image size")
    assert not (tmp_path / "z").exists()


def _folder(root, seed):
    from PIL import Image

    rng = np.random.default_rng(seed)
    for cls in ("c0", "c1"):
        (root / cls).mkdir(parents=True)
        for i in range(3 + seed):
            pixels = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / cls / f"{i}.png")
    return root


def test_a_data_folder_is_read_once_per_command_for_its_identity(tmp_path):
    """A search asks for its data's identity for the study's name, the stored study's check and
    the study it opens: a CIFAR folder (180 MB) was read three times over. Its files are read
    once while they stay as they are; a file changed since is read again."""
    from hwnas import datasets

    root = _folder(tmp_path / "imgs", 0)
    datasets._content_identity.cache_clear()
    first = datasets.data_identity(str(root))
    assert datasets.data_identity(str(root)) == first
    info = datasets._content_identity.cache_info()
    assert (info.misses, info.hits) == (1, 1), info
    image = next(p for p in sorted((root / "c0").iterdir()) if p.is_file())
    image.write_bytes(image.read_bytes() + b"\0")  # another size: other data
    assert datasets.data_identity(str(root)) != first


def test_a_study_knows_its_data_folder_by_its_files_not_its_name_alone(tmp_path):
    """Two data folders called `imgs` with other images: the second search resumed the first's
    study ("5 architectures scored (0 this run)"), every accuracy of its front measured on the
    first folder's images. The study name now carries a digest of the folder's files; the
    same files copied elsewhere keep the name (and resume)."""
    import shutil

    from hwnas.datasets import data_identity
    from hwnas.engine.loop import SearchSettings
    from hwnas.jobs.supernet import SupernetSettings

    for i in (0, 1):
        (tmp_path / f"cifar{i}").mkdir()
    a = _folder(tmp_path / "a" / "imgs", 0)
    b = _folder(tmp_path / "b" / "imgs", 1)
    copy = tmp_path / "c" / "imgs"
    shutil.copytree(a, copy)
    (copy / "notes.txt").write_text("the loader reads no text")  # nor dot-folders
    (copy / ".cache").mkdir()
    (copy / "c0" / "readme.md").write_text("not an image")
    ids = [data_identity(str(p)) for p in (a, b, copy)]
    assert ids[0].startswith("imgs-d") and ids[0] != ids[1] and ids[0] == ids[2]
    assert data_identity("digits") == "digits"
    # the same names and sizes, other pixels (an uncompressed format: every file one size)
    from PIL import Image

    rng = np.random.default_rng(5)
    bmps = []
    for side in ("x", "y"):
        root = tmp_path / side / "bmp"
        for cls in ("c0", "c1"):
            (root / cls).mkdir(parents=True)
            pixels = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / cls / "0.bmp")
        bmps.append(data_identity(str(root)))
    assert bmps[0] != bmps[1]
    # class folders that are links (to other images each time) are read, so they count
    linked = []
    for src in (a, b):
        root = tmp_path / f"linked-{src.parent.name}" / "imgs"
        root.mkdir(parents=True)
        for cls in ("c0", "c1"):
            (root / cls).symlink_to(src / cls)
        linked.append(data_identity(str(root)))
    assert linked[0] != linked[1] and linked[0] == ids[0]
    # CIFAR pickles of one shape, one relabelled: other data
    cifar = [_cifar10_folder(tmp_path / f"cifar{i}") for i in (0, 1)]
    batch = cifar[1] / "cifar-10-batches-py" / "test_batch"
    data = pickle.loads(batch.read_bytes())
    data["labels"] = [(label + 1) % 10 for label in data["labels"]]
    batch.write_bytes(pickle.dumps(data))
    assert data_identity(str(cifar[0])) != data_identity(str(cifar[1]))
    function = str(Path(__file__).parents[1] / "spaces" / "my_model.py") + ":val_accuracy"
    names = [
        SearchSettings(space="nasbench201", device="pixel3", accuracy=function, data=str(p)).study
        for p in (a, b, copy)
    ]
    assert f"-on-{ids[0]}-" in names[0] and names[0] != names[1] and names[0] == names[2]
    names = [
        SupernetSettings(space="nasbench201", device="pixel3", strategy="gdas", data=str(p)).study
        for p in (a, b)
    ]
    assert names[0] != names[1]
