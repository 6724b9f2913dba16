"""What every search prepares before any work, whatever its strategy: the problem.

:func:`resolve` checks the names (space, dataset, device and its runtime, metrics) and that the
device can measure now; the search kind then checks what it alone needs (an accuracy table, a
supernet, training data, a predictor); :func:`open_problem` finally opens the measurement store
and the study storage, so a command with bad input creates no file. Table, few-shot and
supernet searches all prepare through these two functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwnas.db import absolute_url, redact
from hwnas.devices import Device, get_device, offline_routes
from hwnas.engine.loop import SearchSettings, open_storage
from hwnas.errors import DeviceUnavailableError, HwnasError
from hwnas.measure import Profiler
from hwnas.paths import check_writable, default_storage_url, default_store_path, hwnas_home
from hwnas.spaces import IndexedSpace, SearchSpace, ability, get_space
from hwnas.store import MeasurementStore


@dataclass
class Problem:
    """A search problem with its names resolved and its store and storage open.

    Attributes:
        settings: the validated settings.
        space: the search space.
        device: the device (reachable).
        profiler: the device and the measurement store (None for a recorded table).
        storage_url: the study storage URL without its password (:func:`hwnas.db.redact`):
            what run folders and the terminal show.
        storage: the opened Optuna storage.
    """

    settings: SearchSettings
    space: SearchSpace
    device: Device
    profiler: Profiler
    storage_url: str
    storage: Any


def resolve(settings: SearchSettings, space_note: str = "") -> tuple[SearchSpace, Device]:
    """The space and the device of ``settings``, checked; opens nothing. ``space_note`` is
    added to the error of a device without values for the space (why that space: a
    strategy's only one).

    Raises:
        HwnasError: unknown space, dataset or device; a runtime the device cannot use; a device
            that cannot measure now, lacks the objective's metric (or latency under a limit), or
            has no values for the space; an energy meter that does not count
            (:meth:`~hwnas.devices.base.Device.require_metric`).
    """
    space = get_space(settings.space)
    space.dataset(settings.dataset)
    device = get_device(settings.device, runtime=settings.runtime)
    try:
        device.require_reachable()
    except DeviceUnavailableError as exc:
        routes = offline_routes(device, space.name, settings.metric)
        raise DeviceUnavailableError(f"{exc}; {routes}") from None
    device.require_metric(settings.metric)  # an energy meter that does not count: here
    if settings.max_latency is not None:
        device.check_metric("latency_ms")
    if not device.supports(space.name):
        # a space of no table (declared, a user's): its networks are measured where they run
        table = (
            ", or from a table of them (hwnas measure import --table)"
            if ability(space, IndexedSpace) is not None
            else ""
        )
        live = (
            f"; {space.name}'s costs come from a device that runs its networks (--device cpu, "
            f"a board or a phone){table}"
            if not space_note
            else ""
        )
        raise HwnasError(
            f"device '{device.name}' has no recorded measurements for space '{space.name}' "
            f"(it has: {', '.join(device.spaces)})" + (f"; {space_note}" if space_note else live)
        )
    device.check_networks(space, settings.dataset)
    return space, device


def open_problem(
    settings: SearchSettings,
    space: SearchSpace,
    device: Device,
    storage: str | None = None,
    store_path: str | Path | None = None,
) -> Problem:
    """Open the measurement store (a SQLite file or a PostgreSQL URL; none for a recorded
    table) and the study storage (default: ``studies.db`` in the hwnas home).

    Raises:
        HwnasError: an hwnas home that cannot be written (when a default is used), an unusable
            store or storage, a store given for a recorded device (which reads none).
    """
    if store_path is not None and not device.stored_in_profiler:  # refused, not ignored
        raise HwnasError(
            f"--store: device '{device.name}' is a recorded table: nothing is measured or read "
            "from a measurement store (leave --store out)"
        )
    if storage is None or (store_path is None and device.stored_in_profiler):
        check_writable(hwnas_home(), "HWNAS_HOME")  # default studies.db / measurements.db
    store = (
        MeasurementStore(store_path or default_store_path()) if device.stored_in_profiler else None
    )
    if storage is None:
        storage = default_storage_url()
        Path(storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    rdb = open_storage(storage)
    # recorded absolute: a relative SQLite file names another database from another folder
    url = redact(absolute_url(storage))
    return Problem(settings, space, device, Profiler(device, store), url, rdb)
