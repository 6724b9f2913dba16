"""Writing a run's model zoo: one entry per Pareto architecture, swapped into place whole.

Three kinds of entries, each a :func:`hwnas.zoo.entry.write_entry` folder:

- random weights (table search): the space's network with hwnas's seeded weights, its
  accuracy the benchmark's (or, with the user's accuracy function, what that returned for the
  architecture, said as such); exported once per model hash (:mod:`hwnas.export_cache`);
- trained by :class:`hwnas.zoo.train.ZooTrainer` (``--train-zoo``, ``hwnas train``): the
  measured test accuracy, the benchmark's beside it;
- trained by a supernet search (inherited, fine-tuned weights handed in as ``trained``).

Chance-level architectures (accuracy at most :data:`hwnas.datasets.CHANCE_FACTOR` x chance,
such as NAS-Bench-201 cells with no path from input to output) are not exported: no weights
make them useful (their output does not depend on their input), and a zoo is what users ship.
``pareto.csv`` keeps them, with an empty ``zoo`` cell and ``chance_level`` true.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.cost_record import search_batch
from hwnas.datasets import chance_verdict
from hwnas.export import ExportedModel
from hwnas.paths import sweep_temporaries, temporary
from hwnas.progress import SILENT, Reporter
from hwnas.spaces.base import Arch, SearchSpace
from hwnas.zoo.card import (
    BENCHMARK_PREPROCESSING,
    CARD_FILE,
    MODEL_FILE,
    WEIGHTS_FILE,
    build_fingerprint,
    card_for,
    input_layout,
    license_of,
)
from hwnas.zoo.entry import write_entry
from hwnas.zoo.read import OS_METADATA, TEMPORARY

if TYPE_CHECKING:  # pragma: no cover
    from hwnas.engine.loop import SearchResult, TrialRecord
    from hwnas.zoo.train import ZooTrainer


def entry_name(rank: int, record: TrialRecord) -> str:
    """Folder name of a zoo entry: its row in the exported list and its model hash (a hash of
    its arch string where no model was measured: a latency read or predicted).

    Raises:
        HwnasError: a trial whose ``model_hash`` attribute (read from the study, which other
            workers write) would not make one folder name.
    """
    from hwnas.export import content_hash
    from hwnas.paths import safe_name

    tag = record.attrs.get("model_hash") or content_hash(record.arch)
    return safe_name(f"{rank:02d}-{tag}", "zoo entry name")


def zoo_columns(
    records: list[TrialRecord], num_classes: int, exported: bool = True
) -> dict[str, dict[str, str]]:
    """``pareto.csv``'s zoo columns for ``records`` (the list handed to :func:`write_zoo`):
    arch -> {``zoo``: the entry's folder name, empty if not exported; ``chance_level``:
    ``true`` / ``false``}.

    Args:
        records: the records in zoo order.
        num_classes: classes of the accuracy's dataset (chance is 100 / num_classes %).
        exported: whether a zoo is written at all (``--no-zoo``: every ``zoo`` cell empty).
    """
    out = {}
    for rank, r in enumerate(records):
        chance = chance_verdict({"value": r.accuracy}, num_classes)["value"]  # chosen on
        out[r.arch] = {
            "zoo": entry_name(rank, r) if exported and not chance else "",
            "chance_level": "true" if chance else "false",
        }
    return out


def write_zoo(
    folder: Path,
    result: SearchResult,
    space: SearchSpace,
    other_latencies: dict[str, dict[str, dict[str, Any]]],
    records: list[TrialRecord] | None = None,
    trained: dict[str, dict[str, Any]] | Callable[[list[TrialRecord]], Any] | None = None,
    trainer: ZooTrainer | None = None,
    log: Callable[[str], None] | None = None,
    reporter: Reporter = SILENT,
    recorded: dict[str, str] | None = None,
) -> list[Path]:
    """One folder per Pareto architecture (see the module doc), written into a temporary
    sibling and renamed into place when complete: an export that fails part-way (a full disk,
    a model that cannot be exported, Ctrl-C while training) leaves the previous zoo, or none,
    never a partial one; workers sharing a run folder each put a whole zoo in place.

    An entry of the zoo in place that holds trained weights (``hwnas train`` on this run's
    zoo) is kept as it is, not replaced by a random-weight export, nor by a supernet's subnet
    where it was trained from scratch, where its architecture is
    still on the front and ``recorded`` vouches for it (:func:`kept_entries`); ``reporter``
    gets a line saying how many were (and how many such entries were not vouched for).

    Args:
        folder: the zoo folder.
        result: the search result.
        space: the search space (builds and exports each network).
        other_latencies: arch -> device -> {"value", "source"} from other devices' recorded
            tables, added to each card.
        records: the records to export (default: the Pareto front).
        trained: arch -> {"model", "input_shape", "num_classes", "dataset", "weights", and
            optionally "data" (:class:`hwnas.datasets.DataSplits`) and "accuracy" (the card's,
            where it is not the record's)}: export that trained module (a supernet's subnet,
            the network the user's accuracy function scored) instead of a freshly built
            network; or a function of the records it makes entries of, giving that dict
            (:meth:`hwnas.engine.evaluate.FunctionEvaluator.zoo_models`), called for those
            not kept (nor no better than chance) only, as making one may run the user's
            accuracy function again.
        trainer: train each architecture from scratch with its space's recipe instead of
            exporting random weights (``--train-zoo``).
        log: one line per entry.
        reporter: shows the export as a step, one unit per entry (:mod:`hwnas.progress`).
        recorded: ``zoo/<entry>/<file>`` -> sha256 that the run's study recorded at publish
            time (its ``artifacts``, kept outside the run folder): a trained entry is kept
            only where its ``card.json`` and ``model.onnx`` are the files recorded there, so
            an entry edited in the run folder is never taken into this run's record. None:
            none is kept.

    Returns:
        The card paths (inside ``folder``).

    Raises:
        OSError: the zoo could not be written (nothing is left behind).
        HwnasError: training failed on a user error.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    sweep_temporaries(folder.parent)  # what a killed export left
    # --train-zoo trains every entry itself (its own data, from the training cache)
    keep, unproven = {}, 0
    later = trained if callable(trained) else None  # made for the entries not kept
    trained = None if later is not None else trained
    if trainer is None:  # the architectures still on the front that would get random weights
        front = {r.arch for r in (result.pareto if records is None else records)}
        keep = {
            a: e for a, e in kept_entries(folder, space, result.settings).items()
            if a in front and (a not in (trained or {}) or _from_scratch(e))
        }  # fmt: skip
        vouched = {a: e for a, e in keep.items() if _recorded_as(e, recorded or {})}
        unproven, keep = len(keep) - len(vouched), vouched
    if later is not None:
        classes = space.dataset(result.settings.dataset).num_classes
        wanted = [r for r in (result.pareto if records is None else records) if r.arch not in keep]
        trained = later(
            [r for r in wanted if not chance_verdict({"value": r.accuracy}, classes)["value"]]
        )
    kept: list[str] = []
    tmp = _temporary(folder)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        names = _write_zoo_into(
            tmp, result, space, other_latencies, records, trained, trainer, log, reporter,
            keep, kept,
        )  # fmt: skip
        same = mark_same_networks(tmp)
        _swap_in(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if kept:
        n, rest = len(kept), len(names) - len(kept)
        reporter.note(
            f"zoo: kept {n} trained entr{'y' if n == 1 else 'ies'} as "
            f"{'it was' if n == 1 else 'they were'} (architecture still on the front); "
            f"{rest} other{'' if rest == 1 else 's'} written anew"
        )
    for group in same:
        reporter.note(
            f"zoo: {' and '.join(group)} ship the same network (identical model.onnx graphs: "
            "the architectures differ only in operations whose results are discarded, or in "
            "widths that round to the same channels at the supernet's reduced size); their "
            "cards say so"
        )
    if unproven:
        reporter.note(
            f"zoo: {unproven} trained entr{'y' if unproven == 1 else 'ies'} replaced with random "
            "weights: not the files the run's study recorded (changed since, or retrained where "
            "the study could not be updated)"
        )
    return [folder / name for name in names]


def _from_scratch(entry: Path) -> bool:
    """Whether the zoo ``entry`` holds a network trained from scratch (``hwnas train`` on the
    run's zoo), not a supernet's subnet with inherited weights: a supernet search run again
    keeps it rather than export its subnet over it."""
    import json

    try:
        build = json.loads((entry / CARD_FILE).read_text()).get("build")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(build, dict) and build.get("kind") != "supernet"


def _recorded_as(entry: Path, recorded: dict[str, str]) -> bool:
    """Whether ``entry``'s ``card.json`` and ``model.onnx`` have the sha256 ``recorded``
    holds for them (``zoo/<entry>/<file>``)."""
    from hwnas.paths import sha256_file

    for name in (CARD_FILE, MODEL_FILE):
        want = recorded.get(f"zoo/{entry.name}/{name}")
        try:
            if not isinstance(want, str) or sha256_file(entry / name) != want:
                return False
        except OSError:
            return False
    return True


def kept_entries(folder: Path, space: SearchSpace, settings: Any) -> dict[str, Path]:
    """The entries of the zoo ``folder`` (as an earlier run, then ``hwnas train``, left it)
    that :func:`write_zoo` keeps instead of exporting random weights over them: arch -> entry
    folder, for each entry whose card has trained weights, this search's study, space (the
    fingerprint its ``build`` records, where it records one: a space file edited since is
    another network) and benchmark dataset, and whose every listed file has its sha256.
    A folder that is no plain zoo, or an entry that fails any of these, is left out."""
    from hwnas.errors import HwnasError
    from hwnas.paths import plain_dir
    from hwnas.zoo.read import is_entry, read_entry

    out: dict[str, Path] = {}
    try:
        if folder.is_symlink() or not folder.is_dir():
            return out
        children = sorted(folder.iterdir())
    except OSError:
        return out
    for entry in children:
        try:
            if not plain_dir(entry) or not is_entry(entry):
                continue
            card = read_entry(entry)
            if _keepable(entry, card, space, settings):
                out.setdefault(card["arch"], entry)
        except (HwnasError, OSError):  # unreadable: exported anew, as before
            continue
    return out


def _keepable(entry: Path, card: dict[str, Any], space: SearchSpace, settings: Any) -> bool:
    """Whether ``entry`` (its ``card``) is one :func:`kept_entries` keeps."""
    from hwnas.paths import confined, plain_file, sha256_file

    weights, build = card.get("weights"), card.get("build")
    if not isinstance(weights, dict) or weights.get("kind") != "trained":
        return False
    if not isinstance(build, dict) or card.get("space") != space.name:
        return False
    if card.get("study") != settings.study or card.get("benchmark_dataset") != settings.dataset:
        return False
    recorded = build.get("fingerprint")
    if recorded is not None and recorded != build_fingerprint(space, weights_file=True):
        return False
    files = card.get("files")
    if not isinstance(files, dict) or weights.get("file") not in files or MODEL_FILE not in files:
        return False
    for name, digest in files.items():
        path = confined(entry, *str(name).split("/"), what="card.json file")
        if not plain_file(path) or sha256_file(path) != digest:
            return False
    return True


def _keep_entry(old: Path, new: Path) -> None:
    """Put the kept entry ``old`` at ``new``: its files as they are where the name is the same;
    under another name (the front's order changed), the same model, weights, test data and
    card with the new ``name`` (which the card, README and ONNX metadata carry).

    Raises:
        OSError: ``old`` could not be read (another worker replaced the zoo meanwhile).
    """
    import json

    card = json.loads((old / CARD_FILE).read_text())
    if old.name == new.name:
        for name in [*card["files"], CARD_FILE]:
            (new / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(old / name, new / name)
        return
    _rewrite_entry(old, new, {**card, "name": new.name})


def _rewrite_entry(old: Path, new: Path, card: dict[str, Any]) -> None:
    """Write the entry ``old``'s model, weights and test data at ``new`` (``old`` itself: in
    place) with ``card`` (its ``files`` are written anew), which the card, README and ONNX
    metadata carry.

    Raises:
        OSError: ``old`` could not be read.
    """
    from hwnas.zoo.entry import read_tensor

    tests = card["test_data"]
    weights = (card.get("weights") or {}).get("file")
    model = ExportedModel(
        onnx_bytes=(old / MODEL_FILE).read_bytes(),
        params=int(card["params"]),
        flops=int(card["flops"]),
        input_shape=tuple(card["input"]["shape"]),
        test_input=read_tensor(old / tests["folder"] / tests["inputs"][0]),
        test_output=read_tensor(old / tests["folder"] / tests["outputs"][0]),
        weights=(old / weights).read_bytes() if weights else None,
        test_label=tests.get("label"),
    )
    write_entry(new, model, {k: v for k, v in card.items() if k != "files"})


def mark_same_networks(folder: Path) -> list[list[str]]:
    """Give each entry of the zoo ``folder`` whose ``model.onnx`` has the graph of others
    (the same ``graph_signature``) a ``same_network`` section naming them
    (:func:`hwnas.zoo.card.same_network`), and take it from an entry that has none; the
    entries that change are rewritten in place (card, README, ONNX metadata).

    Returns:
        The groups of entries that ship the same network (names), each sorted.

    Raises:
        OSError: an entry could not be read or written.
    """
    import json

    from hwnas.zoo.card import same_network
    from hwnas.zoo.read import is_entry

    cards = {
        p.name: json.loads((p / CARD_FILE).read_text())
        for p in sorted(folder.iterdir())
        if p.is_dir() and not p.is_symlink() and is_entry(p)
    }
    groups: dict[str, list[str]] = {}
    for name, card in cards.items():
        if isinstance(card.get("graph_signature"), str):
            groups.setdefault(card["graph_signature"], []).append(name)
    for name, card in cards.items():
        others = [n for n in groups.get(card.get("graph_signature"), []) if n != name]
        want = same_network(others) if others else None
        if card.get("same_network") != want:
            card = {k: v for k, v in card.items() if k != "same_network"}
            if want is not None:
                card["same_network"] = want
            _rewrite_entry(folder / name, folder / name, card)
    return [g for g in groups.values() if len(g) > 1]


def same_network_of(folder: Path, signature: str | None) -> dict[str, Any] | None:
    """The ``same_network`` section of an entry written at ``folder`` whose ``model.onnx`` has
    the graph ``signature``, beside the zoo's other entries as their cards say they are (None:
    none has that graph, or ``folder`` is in no zoo)."""
    import json

    from hwnas.zoo.card import same_network
    from hwnas.zoo.read import is_entry

    if signature is None or not folder.parent.is_dir():
        return None
    others = []
    for p in sorted(folder.parent.iterdir()):
        if p.name == folder.name or p.is_symlink() or not p.is_dir() or not is_entry(p):
            continue
        try:
            card = json.loads((p / CARD_FILE).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(card, dict) and card.get("graph_signature") == signature:
            others.append(p.name)
    return same_network(others) if others else None


def network_signature(model: ExportedModel) -> str:
    """:func:`hwnas.export.graph_signature` of ``model``'s ONNX graph."""
    import onnx

    from hwnas.export import graph_signature

    return graph_signature(onnx.load_from_string(model.onnx_bytes))


def foreign_items(folder: Path) -> list[str]:
    """What in the run folder's ``zoo`` hwnas did not write: its name when it is a file (not a
    folder, not a link), else the names of its children that are not zoo entries. A zoo is
    replaced or removed whole, so these are what would be lost."""
    from hwnas.zoo.read import is_entry

    if folder.is_symlink() or not folder.exists():
        return []
    if not folder.is_dir():
        return [folder.name]
    sweep_temporaries(folder)  # what a killed `hwnas train` left: hwnas's own
    return sorted(
        p.name
        for p in folder.iterdir()
        if (p.is_symlink() or not is_entry(p))
        and p.name not in OS_METADATA
        and not TEMPORARY.match(p.name)  # temporary()'s names
    )


def check_zoo_folder(out: Path) -> None:
    """Refuse, before a search, a run folder whose ``zoo`` holds what hwnas did not write (the
    zoo written at the end replaces it whole).

    Raises:
        HwnasError: one line naming the first few such items.
    """
    from hwnas.errors import HwnasError

    found = foreign_items(out / "zoo")
    if found:
        raise HwnasError(
            f"{out / 'zoo'} holds what hwnas did not write ({', '.join(found[:3])}"
            f"{', ...' if len(found) > 3 else ''}), and the run's zoo would replace it: move "
            "it, or give another --out"
        )


def remove_zoo(folder: Path) -> None:
    """Remove the zoo folder an earlier run left (a search run with ``--no-zoo`` writes none,
    and an earlier front's entries would read as this run's); a link goes, not its target; a
    file, or a folder holding anything but zoo entries, is left as it is (not hwnas's)."""
    if foreign_items(folder) or not (folder.exists() or folder.is_symlink()):
        return
    old = temporary(folder, "old")
    try:
        os.replace(folder, old)
    except FileNotFoundError:  # another worker moved it first
        return
    _discard(old)


def _discard(old: Path) -> None:
    """Delete a zoo moved aside: a link goes, not its target (a handed-over ``zoo/`` linking
    elsewhere)."""
    if old.is_symlink():
        old.unlink(missing_ok=True)
    else:
        shutil.rmtree(old, ignore_errors=True)


def _temporary(path: Path) -> Path:
    """A hidden sibling of ``path`` to write first and rename over it
    (:func:`hwnas.paths.temporary`)."""
    return temporary(path)


def _swap_in(new: Path, folder: Path, attempts: int = 10) -> None:
    """Put the folder ``new`` in place of ``folder`` (which may exist, and which another worker
    may be replacing at the same moment)."""
    import errno

    old = temporary(folder, "old")
    for attempt in range(attempts):
        try:
            if folder.exists() or folder.is_symlink():  # a link (a dangling one too) is moved
                os.replace(folder, old)
            os.replace(new, folder)
            break
        except OSError as exc:  # another worker put its zoo in place between our two steps
            if (
                exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT)
                or attempt + 1 == attempts
            ):
                raise
    _discard(old)


def _write_zoo_into(
    folder: Path,
    result: SearchResult,
    space: SearchSpace,
    other_latencies: dict[str, dict[str, dict[str, Any]]],
    records: list[TrialRecord] | None,
    trained: dict[str, dict[str, Any]] | None,
    trainer: ZooTrainer | None,
    log: Callable[[str], None] | None,
    reporter: Reporter = SILENT,
    keep: dict[str, Path] | None = None,
    kept: list[str] | None = None,
) -> list[str]:
    """:func:`write_zoo`'s work, in ``folder``; returns the card paths relative to it.
    ``keep``: arch -> trained entry to keep in place of a random-weight export
    (:func:`kept_entries`); the names of those kept are appended to ``kept``."""
    log = log or (lambda _m: None)
    s = result.settings
    spec = space.dataset(s.dataset)
    records = result.pareto if records is None else records
    cards = []
    todo = [
        (rank, r)
        for rank, r in enumerate(records)
        if not chance_verdict(  # the accuracy it was chosen on, as its card judges
            {"value": r.accuracy},
            (trained or {}).get(r.arch, {}).get("num_classes", spec.num_classes),
        )["value"]
    ]
    verb = "writing" if trained else "training" if trainer is not None else "exporting"
    with reporter.step(f"zoo {verb}", total=len(todo), unit="models") as step:
        for i, (rank, r) in enumerate(todo):
            step.update(status=f"now {r.arch}")
            cards.append(
                _write_one(folder, space, s, rank, i, len(todo), r, other_latencies, trained,
                           trainer, log, keep or {}, kept if kept is not None else [])
            )  # fmt: skip
            step.advance(status="")
    folder.mkdir(parents=True, exist_ok=True)  # an empty front still gives a zoo folder
    return cards


def _write_one(
    folder, space, s, rank, i, n, r, other_latencies, trained, trainer, log, keep, kept
) -> str:
    """One entry of :func:`_write_zoo_into` (the ``i``-th of ``n``); its card path."""
    arch = space.parse(r.arch)
    name = entry_name(rank, r)
    old = keep.get(r.arch)
    # the same model hash (the name after its rank): the same network as when it was trained
    # (``keep`` holds a supernet's subnet only where hwnas train trained it from scratch)
    if old is not None and old.name.partition("-")[2] == name.partition("-")[2]:
        try:
            _keep_entry(old, folder / name)
            kept.append(name)
            return f"{name}/{CARD_FILE}"
        except (OSError, ValueError, KeyError, TypeError):  # replaced meanwhile: export it
            shutil.rmtree(folder / name, ignore_errors=True)
    devices = device_costs(
        r, s.device, other_latencies.get(r.arch, {}), s.metric, batch=search_batch(s.device)
    )
    found = {"study": s.study, "trial": r.number, "device": s.device}
    own = (trained or {}).get(r.arch)
    if own is not None:
        model, card = subnet_entry(space, arch, s.dataset, name, r, own, devices, found)
    elif trainer is not None:
        log(f"training {i + 1}/{n}: {r.arch}")
        table = search_accuracy(r)
        model, card = trained_entry(trainer, arch, name, devices, table, found)
        log(f"  test accuracy {card['accuracy']['value']:.2f}% on {card['dataset']}")
    else:
        accuracy = search_accuracy(r)
        model, card = random_entry(space, arch, s.dataset, name, accuracy, devices, found)
    write_entry(folder / name, model, card)
    return f"{name}/{CARD_FILE}"


FUNCTION_PREFIX = "function:"
"""How the ``accuracy_source`` of a score by the user's accuracy function begins
(:meth:`hwnas.engine.evaluate.FunctionEvaluator.source`)."""


def search_accuracy(r: TrialRecord) -> dict[str, Any]:
    """The card's ``accuracy`` of a table search's trial ``r``: the benchmark table's test
    accuracy (``kind`` "benchmark table", ``split`` "test"), or what the user's accuracy
    function returned (``kind`` "function", no split: the function's own evaluation)."""
    source = str(r.attrs.get("accuracy_source", ""))
    if source.startswith(FUNCTION_PREFIX):
        return {"value": r.accuracy, "source": source, "kind": "function"}
    return {"value": r.accuracy, "source": source, "split": "test", "kind": "benchmark table"}


def has_benchmark(space: SearchSpace) -> bool:
    """Whether ``space``'s networks come from a benchmark hwnas ships data of (NOTICE): an
    accuracy table, or a shipped device's recorded table; a user's space file has none."""
    from hwnas.spaces import TabulatedSpace, ability

    if ability(space, TabulatedSpace) is not None:
        return True
    return _shipped_table(space.name)


@functools.cache
def _shipped_table(space: str) -> bool:
    """Whether a shipped device records a table of ``space`` (fixed while hwnas runs: asked
    for every zoo entry, each scan of the device profiles some milliseconds)."""
    from hwnas.devices import recorded_tables

    return any(True for _ in recorded_tables(space, "latency_ms", shipped=True))


def _licence(space: SearchSpace, benchmark: bool) -> dict[str, str]:
    """:func:`hwnas.zoo.card.card_for`'s ``license`` and ``license_note`` for ``space``."""
    license, note = license_of(space, benchmark)
    return {"license": license, "license_note": note}


_EXPLAINED = ("the benchmark's:", "the search's accuracy function's value")
"""What :func:`_accuracy_note` begins with: a source that holds one says what it is already."""


def _accuracy_note(accuracy: dict[str, Any] | None, dataset: str) -> str:
    """What the accuracy of a search's trial is of, for notes on other weights."""
    if accuracy is not None and accuracy.get("kind") == "function":
        return (
            "the search's accuracy function's value, of the network it was handed, not of "
            "these weights"
        )
    return f"the benchmark's: this architecture trained with its recipe on {dataset}"


def device_costs(
    r: TrialRecord,
    device: str,
    others: dict[str, dict[str, Any]],
    metric: str | None = None,
    batch: int = 1,
) -> dict[str, dict[str, dict[str, Any]]]:
    """device -> metric -> {"value", "source"}: the search device's costs of ``r`` (the
    searched ``metric`` first: the card's title shows it; where the value is a supernet
    search's deployed network, ``trained_subnet`` holds this file's own, the trained proxy's,
    ``{"value", "source"}``; ``"batch_size"`` where the device's values are of a ``batch`` >
    1, as the other recorded devices' are: ms or mJ per batch, not per input), then ``others``
    (the shipped recorded devices' latency: :func:`recorded_latencies`)."""
    order = sorted(r.costs, key=lambda m: m != metric)
    size = {"batch_size": batch} if batch > 1 else {}
    own = {m: {"value": r.costs[m].value, "source": r.costs[m].source, **size} for m in order}
    for m, entry in own.items():  # a supernet's deployed network: this file, its trained proxy
        proxy = r.attrs.get(f"trained_subnet_{m}")
        if isinstance(proxy, (int, float)) and not isinstance(proxy, bool):
            entry["trained_subnet"] = {
                "value": float(proxy),
                "source": str(r.attrs.get(f"trained_subnet_{m}_source", "")),
            }
    out = {device: own}
    for dev, entry in others.items():
        out.setdefault(dev, {"latency_ms": entry})
    return out


def _benchmark_note(space: SearchSpace, dataset: str, classes: int | None = None) -> str:
    spec = space.dataset(dataset)
    shape = "x".join(map(str, spec.input_shape))
    if has_benchmark(space):
        note = (
            f"Device values are for the benchmark's {space.name} network for {dataset} (input "
            f"{shape}, {spec.num_classes} classes), as each source names: recorded tables hold "
            "the benchmark's measurements, live devices hwnas's measurement of the same network."
        )
    else:
        note = (
            f"Device values are for space {space.name}'s network of this architecture for "
            f"{dataset} (input {shape}, {spec.num_classes} classes), as each source names: "
            "live devices hwnas's measurement of it, recorded tables their author's."
        )
    if classes is not None and classes != spec.num_classes:
        note += (
            f" This model has the same layers but a {classes}-class classifier (instead of "
            f"{spec.num_classes}): its final linear layer differs, a negligible share of the "
            "time."
        )
    return note


def channel_order(channels: int) -> str:
    """The card's ``channel_order`` of an image input of ``channels`` channels."""
    return {1: "gray", 3: "RGB"}.get(channels, f"{channels} channels, as in training")


def benchmark_preprocessing(
    dataset: str, shape: tuple[int, ...], spec_shape: tuple[int, ...], benchmark: bool = True
) -> dict[str, Any]:
    """The card's preprocessing of a random-weight network of ``dataset`` taking ``shape``
    (batch first; ``spec_shape``: the dataset's input without batch): for images the
    benchmark's per-channel statistics (:data:`BENCHMARK_PREPROCESSING`, where they are of as
    many channels, else mean 0 and std 1 per channel), for other inputs
    :func:`unrecorded_preprocessing` (a space declares no statistics of them); ``benchmark``
    False: a space without a benchmark (:func:`has_benchmark`), resized to its input size."""
    if len(shape) != 4:
        return unrecorded_preprocessing(shape)
    channels = int(shape[1])
    stats = BENCHMARK_PREPROCESSING.get(dataset, {})
    if len(stats.get("mean", ())) != channels:
        stats = {}
    return {
        "layout": "NCHW",
        "channel_order": channel_order(channels),
        "size": list(spec_shape[1:]),
        "scale": "pixel / 255",
        "resize": f"to {spec_shape[1]}x{spec_shape[2]} "
        + ("as the benchmark does" if benchmark else "(the space's input size)"),
        "mean": [round(v, 6) for v in stats.get("mean", [0.0] * channels)],
        "std": [round(v, 6) for v in stats.get("std", [1.0] * channels)],
        "steps": ["pixel / 255", "(x - mean) / std per channel", "float32, NCHW"],
        "source": stats.get("source", "unknown: mean 0, std 1"),
    }


def unrecorded_preprocessing(shape: tuple[int, ...]) -> dict[str, Any]:
    """The card's preprocessing of a network taking ``shape`` (batch first) whose inputs'
    preparation hwnas was not told (a user's model scored by the user's function without
    ``data``): images keep the image keys, mean 0 and std 1 per channel; (N, C, L) and (N, F)
    inputs their layout, ``size`` (the input without batch) and no normalisation (``mean``
    and ``std`` None)."""
    if len(shape) == 4:
        channels = int(shape[1])
        return {
            "layout": "NCHW", "channel_order": channel_order(channels),
            "size": [int(d) for d in shape[-2:]], "scale": "as in training",
            "resize": "as in training", "mean": [0.0] * channels, "std": [1.0] * channels,
            "steps": ["as in training"], "source": "not recorded",
        }  # fmt: skip
    layout, _axes = input_layout(shape)
    return {
        "layout": layout,
        "size": [int(d) for d in shape[1:]],
        "scale": "as in training",
        "mean": None,
        "std": None,
        "steps": ["as in training", f"float32, {layout}"],
        "source": "none recorded: the space declares no preprocessing of its inputs",
    }


def random_entry(
    space: SearchSpace,
    arch: Arch,
    dataset: str,
    name: str,
    accuracy: dict[str, Any],
    devices: dict[str, dict[str, dict[str, Any]]],
    found: dict[str, Any],
) -> tuple[ExportedModel, dict[str, Any]]:
    """A random-weight entry: the space's network for ``dataset`` with hwnas's seeded weights
    (from the export cache when exported before); ``accuracy`` (:func:`search_accuracy`) is
    the benchmark's for the architecture, or the search's accuracy function's, and the card
    says which."""
    from hwnas.export_cache import WEIGHT_SEED

    model, _cached = random_weights(space, arch, dataset)
    spec = space.dataset(dataset)
    benchmark = has_benchmark(space)
    preprocessing = benchmark_preprocessing(
        dataset, tuple(model.input_shape), spec.input_shape, benchmark
    )
    if accuracy.get("kind") == "function":
        of = (
            f"the accuracy is what the search's accuracy function returned for this "
            f"architecture ({accuracy['source']}: a network it was handed, built with its own "
            "seed, not these weights)"
        )
    else:
        of = "the accuracy is the benchmark's for this architecture trained with its recipe"
    card = card_for(
        name=name,
        space=space.name,
        task=space.task,
        arch=arch.text,
        benchmark_dataset=dataset,
        params=model.params,
        flops=model.flops,
        input_shape=model.input_shape,
        dataset=dataset,
        num_classes=spec.num_classes,
        labels=None,
        label_order=(
            f"output i is class i of {dataset} in "
            + ("its official label order" if benchmark else "the order of your data's labels")
            + "; these random weights have learnt no class"
        ),
        preprocessing=preprocessing,
        accuracy=accuracy,
        weights={
            "kind": "random",
            "note": (
                f"random initialisation (torch seed {WEIGHT_SEED}): {of}; train before use "
                "(`hwnas train THIS_FOLDER --data ...`)"
            ),
            "file": None,
        },
        devices=devices,
        devices_note=_benchmark_note(space, dataset),
        **_licence(space, benchmark),
        graph_signature=network_signature(model),
        test_label=None,
        build={
            "kind": "space",
            "space": space.name,
            "arch": arch.text,
            "dataset": dataset,
            "num_classes": spec.num_classes,
            "seed": WEIGHT_SEED,
            "fingerprint": build_fingerprint(space, weights_file=False),
        },
        **found,
    )
    return model, card


def trained_entry(
    trainer: ZooTrainer,
    arch: Arch,
    name: str,
    devices: dict[str, dict[str, dict[str, Any]]],
    table_accuracy: dict[str, Any] | None,
    found: dict[str, Any],
    table_explained: bool = False,
) -> tuple[ExportedModel, dict[str, Any]]:
    """An entry trained from scratch by ``trainer`` (its measured accuracy; ``table_accuracy``,
    the benchmark's, beside it, its source followed by what it is the accuracy of unless
    ``table_explained``: the ``table_accuracy`` of a trained entry's card, which says so
    already)."""
    from hwnas.export import from_module

    t = trainer.train(arch)
    model = from_module(t.model, t.input_shape, t.test_input, t.test_label, keep_weights=True)
    data, space = trainer.data, trainer.space
    if (
        table_accuracy is not None
        and not table_explained
        and not any(m in table_accuracy["source"] for m in _EXPLAINED)
    ):
        beside = _accuracy_note(table_accuracy, trainer.dataset)
        if table_accuracy.get("kind") != "function":
            beside += ", not these weights"
        table_accuracy = {**table_accuracy, "source": f"{table_accuracy['source']} ({beside})"}
    applied = t.training["applied"]
    card = card_for(
        name=name,
        space=space.name,
        task=space.task,
        arch=arch.text,
        benchmark_dataset=trainer.dataset,
        params=model.params,
        flops=model.flops,
        input_shape=model.input_shape,
        dataset=data.name,
        num_classes=data.num_classes,
        labels=list(data.classes),
        label_order=f"output i is labels[i] (the class order of {data.name})",
        preprocessing=trainer.preprocessing(int(t.input_shape[-1])),
        accuracy={
            "value": t.accuracy,
            "source": t.accuracy_source,
            "split": "test",
            "kind": "measured",
        },
        weights={
            "kind": "trained",
            "note": (
                f"trained from scratch on {data.name} with the {trainer.recipe.name} recipe, "
                f"{applied['epochs']} of its {trainer.recipe.epochs} epochs (see Training)"
            ),  # the same whether trained now or taken from the training cache (its log says)
            "file": WEIGHTS_FILE,
        },
        devices=devices,
        devices_note=_benchmark_note(space, trainer.dataset, data.num_classes),
        **_licence(space, has_benchmark(space)),
        graph_signature=network_signature(model),
        table_accuracy=table_accuracy,
        training=t.training,
        test_label=t.test_label,
        build={
            "kind": "space",
            "space": space.name,
            "arch": arch.text,
            "dataset": trainer.dataset,
            "num_classes": data.num_classes,
            "fingerprint": build_fingerprint(space, weights_file=True),
        },
        **found,
    )
    return model, card


def subnet_entry(
    space: SearchSpace,
    arch: Arch,
    dataset: str,
    name: str,
    r: TrialRecord,
    own: dict[str, Any],
    devices: dict[str, dict[str, dict[str, Any]]],
    found: dict[str, Any],
) -> tuple[ExportedModel, dict[str, Any]]:
    """An entry of a supernet search: the subnet with its inherited, fine-tuned weights."""
    import numpy as np

    from hwnas.export import from_module
    from hwnas.export_cache import random_input

    shape = tuple(own["input_shape"])
    data = own.get("data")
    if data is not None and (len(shape) != 4 or int(data.image_shape[0]) != int(shape[1])):
        data = None  # images the user's function was handed, not what this network takes
    if data is not None:
        x, label = data.test.x[:1], int(data.test.y[0])
        if x.shape[-1] != shape[-1]:
            import torch
            import torch.nn.functional as F

            side = (int(shape[-2]), int(shape[-1]))
            x = F.interpolate(torch.from_numpy(x), size=side, mode="bilinear").numpy()
        x = np.ascontiguousarray(x, dtype=np.float32)
        preprocessing = {**data.preprocessing, "size": list(shape[-2:])}
        trained_at = [int(v) for v in data.image_shape[-2:]]
        if trained_at != list(shape[-2:]):  # a subnet of its own resolution (OFA's r)
            h, w = int(shape[-2]), int(shape[-1])
            step = (
                f"bilinear {trained_at[0]}x{trained_at[1]} -> {h}x{w} on the normalised tensor "
                "(torch, align_corners=False): this subnet's input resolution"
            )
            preprocessing["steps"] = [*preprocessing.get("steps", []), step]
            preprocessing["resize"] = f"{preprocessing.get('resize', '')}; then {step}"
        preprocessing["source"] = f"the training split of {data.name} ({len(data.train)} images)"
        labels = list(data.classes)
    else:
        x, label, labels = random_input(shape), None, None
        preprocessing = unrecorded_preprocessing(shape)
    model = from_module(own["model"], shape, x, label, keep_weights=True)
    build = getattr(own["model"], "hwnas_build", None)
    if isinstance(build, dict):
        build = {**build, "fingerprint": build_fingerprint(space, weights_file=True)}
    table = None
    if "table_accuracy" in r.attrs:
        table = {
            "value": r.attrs["table_accuracy"],
            "source": r.attrs.get("table_accuracy_label", ""),
            "split": "test",
            "kind": "benchmark table",
        }
    card = card_for(
        name=name,
        space=space.name,
        task=space.task,
        arch=arch.text,
        benchmark_dataset=dataset,
        params=model.params,
        flops=model.flops,
        input_shape=model.input_shape,
        dataset=own["dataset"],
        num_classes=own["num_classes"],
        labels=labels,
        label_order=f"output i is labels[i] (the class order of {own['dataset']})",
        preprocessing=preprocessing,
        accuracy=own.get("accuracy") or _trained_accuracy(r),
        weights={"kind": "trained", "note": own["weights"], "file": WEIGHTS_FILE},
        devices=devices,
        devices_note=_subnet_devices_note(r),
        **_licence(space, has_benchmark(space)),
        graph_signature=network_signature(model),
        table_accuracy=table,
        test_label=label,
        build=build,
        **found,
    )
    return model, card


def _subnet_devices_note(r: TrialRecord) -> str:
    """The card's ``devices_note`` of a trained subnet: what each device value is of, with the
    trained subnet's own latency where the search device's value is the deployed network's."""
    note = (
        "Each device value is of the network its source names: a live device measured this "
        "subnet; a recorded table's value is of the benchmark's network of the same "
        "architecture at the benchmark's size and width, not of this file (a proxy trained at "
        "the supernet's size); a prediction is labelled as one."
    )
    own = {m: r.attrs.get(f"trained_subnet_{m}") for m in r.costs}
    own = {m: v for m, v in own.items() if isinstance(v, (int, float))}
    for m, v in own.items():
        unit = m.rsplit("_", 1)[-1]
        note += (
            f" The search device's {m} is the deployed network's (the source names its input), "
            "the size the search was steered at; this file is its trained proxy, which "
            f"measured {v:.4g} {unit} there ({r.attrs.get(f'trained_subnet_{m}_source', '')})."
        )
    return note


def _trained_accuracy(r: TrialRecord) -> dict[str, Any]:
    """The card's ``accuracy`` of a fine-tuned supernet subnet: its test accuracy (never used
    to choose it), with ``chosen_on``, the accuracy the search chose it on (validation split, or
    the user's accuracy function). A trial recorded before test accuracies were kept has only
    the latter."""
    source = r.attrs.get("accuracy_source", "")
    chosen = {
        "value": r.accuracy,
        "source": source,
        "split": next(
            (name for name in ("validation", "test") if f"{name} split" in source),
            "the accuracy function's",
        ),
    }
    if "test_accuracy" not in r.attrs:
        return {**chosen, "kind": "measured"}
    return {
        "value": float(r.attrs["test_accuracy"]),
        "source": r.attrs.get("test_accuracy_source", ""),
        "split": "test",
        "kind": "measured",
        "chosen_on": chosen,
    }


def recorded_latencies(
    space_name: str,
    archs: list[str],
    skip: str,
    dataset: str | None = None,
    shipped: bool = False,
) -> dict[str, dict[str, dict]]:
    """Latency of ``archs`` on every recorded device with a table for the space (architectures
    not in the recorded tables, or a cell a table lacks, get none); with ``dataset``, only
    from tables of networks of its input size
    (:meth:`hwnas.devices.base.Device.check_table_dataset`); with ``shipped``, only from the
    tables hwnas ships (:func:`hwnas.devices.is_shipped`): what a model card carries beside
    its own device's values, published numbers with their sources, never a user's other
    devices (a lab's private tables went into every card it shipped, a user's own ``pixel3``
    under the Pixel 3's name).

    Returns:
        arch -> device -> {"value": ms, "source": ...}, and ``"batch_size"`` where the table
        holds the latency of a batch (a GPU's at 256: per batch, not per input).
    """
    from hwnas.devices import recorded_tables
    from hwnas.errors import HwnasError
    from hwnas.spaces import IndexedSpace, ability, get_space

    out: dict[str, dict[str, dict]] = {a: {} for a in archs}
    space = ability(get_space(space_name), IndexedSpace)
    if space is None:  # no table row of any device can be this space's (a user's model)
        return out
    rows = {}
    for a in archs:  # architectures outside the recorded sample have no recorded latency
        try:
            rows[a] = space.index(space.parse(a))
        except HwnasError:
            continue
    for dev, column in recorded_tables(space_name, "latency_ms", shipped=shipped):
        name = dev.name
        if name == skip:
            continue
        if dataset is not None:
            try:
                dev.check_table_dataset(space_name, "latency_ms", dataset)
            except HwnasError:  # another input size's networks
                continue
        source = dev.table_source(space_name, "latency_ms")
        batch = {"batch_size": dev.value_batch_size} if dev.value_batch_size > 1 else {}
        for a, i in rows.items():
            if math.isfinite(column[i]):  # a table may lack the cell (the Pi 5 tables: 6,466)
                out[a][name] = {"value": float(column[i]), "source": source, **batch}
    return out


def random_weights(space: SearchSpace, arch: Arch, dataset: str) -> tuple[ExportedModel, bool]:
    """The export of ``arch``'s network for ``dataset`` with the seeded random weights hwnas
    measures (:data:`hwnas.export_cache.WEIGHT_SEED`), from the cache when it was exported before.

    Returns:
        (the export, whether it came from the cache).
    """
    from hwnas.export_cache import export_random
    from hwnas.measure import arch_workload

    workload = arch_workload(space, arch, dataset)
    return export_random(space, arch, dataset, workload.model_hash, workload.input_shape)
