"""Scoring an architecture for search: its accuracy and its cost on the device.

Accuracy comes from a table (:class:`TableEvaluator`: NAS-Bench-201) or from the user's own
function (:class:`FunctionEvaluator`, the evaluator protocol :data:`AccuracyFunction`); costs
from the device through the profiler and its store (:func:`device_costs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hwnas.cost_record import CostRecord, precision_target
from hwnas.devices.base import METRICS
from hwnas.errors import HwnasError, MeterReadingError, UnrecordedError
from hwnas.measure import Profiler, arch_workload
from hwnas.spaces.base import Arch, SearchSpace

OBJECTIVES = {"latency": "latency_ms", "energy": "energy_mj"}
"""Search objective name -> the device metric it minimises."""


def objective_metric(objective: str) -> str:
    """The device metric ``objective`` minimises ("latency" -> "latency_ms", "energy" ->
    "energy_mj").

    Raises:
        HwnasError: an unknown objective (one line naming the known ones).
    """
    try:
        return OBJECTIVES[objective]
    except (KeyError, TypeError):
        raise HwnasError(
            f"unknown objective '{objective}'; known: {', '.join(OBJECTIVES)}"
        ) from None


@dataclass(frozen=True)
class Evaluation:
    """Accuracy and costs of one architecture, each with where it came from.

    Attributes:
        arch: the architecture.
        accuracy: top-1 accuracy in %.
        accuracy_source: for example ``nasbench201-table:cifar100_test_200ep``.
        costs: metric ("latency_ms", "energy_mj") -> its :class:`~hwnas.cost_record.CostRecord`
            (value in ms or mJ per inference, source, interval, precision).
        model_hash: hash of the measured workload.
    """

    arch: Arch
    accuracy: float
    accuracy_source: str
    costs: dict[str, CostRecord] = field(default_factory=dict)
    model_hash: str = ""

    def attrs(self) -> dict[str, object]:
        """Flat dict for an Optuna trial's user attributes (each cost's by
        :meth:`CostRecord.attrs <hwnas.cost_record.CostRecord.attrs>`)."""
        out: dict[str, object] = {
            "arch": self.arch.text,
            "accuracy": self.accuracy,
            "accuracy_source": self.accuracy_source,
            "model_hash": self.model_hash,
        }
        for cost in self.costs.values():
            out.update(cost.attrs())
        return out


class TableEvaluator:
    """Accuracy from the space's trained-accuracy table, costs from a device via a profiler.

    Args:
        space: a space with ``table_accuracy`` and ``index`` (NAS-Bench-201).
        dataset: dataset whose accuracy is used.
        profiler: device + store.
        metrics: device metrics to obtain for each architecture (the objective's first).
        required: how many of them an architecture must have a value of (the others are
            left out where a table lacks them: :func:`device_costs`).

    Attributes:
        instant: whether scoring is a lookup (a recorded or imported device: tables and
            stored values, nothing runs), so the engine may score before claiming
            (:func:`hwnas.engine.loop.run_search`).
        accuracy_queries: accuracy-table queries made so far.
    """

    def __init__(
        self,
        space: SearchSpace,
        dataset: str,
        profiler: Profiler,
        metrics: list[str],
        required: int = 1,
    ):
        self.space = space
        self.dataset = dataset
        self.profiler = profiler
        self.metrics = [m for m in metrics if m in METRICS]
        self.required = required
        self._accuracy = space.table_accuracy(dataset)
        self._source = space.accuracy_source(dataset)
        self.accuracy_queries = 0
        self.instant = not profiler.device.runs_models

    def zoo_models(self, archs: list[str]) -> None:
        """None: the zoo exports the space's networks (random weights, or ``--train-zoo``)."""
        return None

    def check_resumed(self, records: list[Any]) -> None:
        """:func:`check_recorded_costs` on the profiler's device, and the same for the
        accuracies: a trial's accuracy from the space's table must be the table's (a study
        database edited, or handed over with one, put its accuracy on the front as the
        table's).

        Raises:
            HwnasError: a recorded cost or accuracy differs from its table's value now.
        """
        import math

        from hwnas.errors import HwnasError

        check_recorded_costs(self.profiler.device, self.space, records, self.metrics)
        for r in records:
            if r.attrs.get("accuracy_source") != self._source:
                continue  # another source (a supernet search's measured accuracy)
            now = float(self._accuracy[self.space.index(self.space.parse(r.arch))])
            if not math.isclose(now, r.accuracy, rel_tol=1e-9, abs_tol=1e-9):
                raise HwnasError(
                    f"trial {r.number} of this study holds accuracy {r.accuracy:.4g}% for "
                    f"{r.arch}, but {self._source} gives {now:.4g}%: the study was edited "
                    "or scored from another table; search it as a new study (--study NAME) or "
                    "delete this one"
                )

    def evaluate(self, arch: Arch) -> Evaluation:
        """Query the accuracy table once and obtain every metric (store-cached)."""
        self.accuracy_queries += 1
        accuracy = float(self._accuracy[self.space.index(arch)])
        workload = arch_workload(self.space, arch, self.dataset)
        costs = device_costs(self.profiler, workload, self.metrics, self.required)
        return Evaluation(arch, accuracy, self._source, costs, workload.model_hash)


def check_recorded_costs(
    device: Any, space: SearchSpace, records: list[Any], metrics: Sequence[str] = ()
) -> None:
    """Check that the completed trials of a resumed study hold the values ``device``'s
    recorded tables give now: a table edited or imported again since (a corrected CSV) would
    otherwise leave the old values in the front, silently; so would a table added since
    (energy imported after latency: the old trials have none, the new ones do) or removed.

    Args:
        device: the search's device (its :meth:`~hwnas.devices.base.Device.table`).
        space: the search space.
        records: the study's completed trials (:class:`hwnas.engine.loop.TrialRecord`).
        metrics: the metrics the search records now ("latency_ms", "energy_mj"): a trial
            without one of them that the device's table holds for its architecture was scored
            before the table was there.

    Raises:
        HwnasError: a trial's recorded cost differs from the table's value now, or comes from
            a table the device no longer has, or lacks a value a table of the device has now
            (one line naming the architecture and the table).
    """
    import math

    from hwnas.errors import HwnasError

    new_study = "search it as a new study (--study NAME) or delete this one"
    columns: dict[str, Any] = {}
    for r in records:
        for metric, cost in r.costs.items():
            if not cost.source.startswith("recorded:"):
                continue  # measured or predicted values: the store keeps them as they were
            source = device.table_source(space.name, metric)
            if not source:
                raise HwnasError(
                    f"device '{device.name}' has no {metric} table now; this study was scored "
                    f"from {cost.source.split(':', 1)[1]}: {new_study}"
                )
            if cost.source != source:
                raise HwnasError(
                    f"the {metric} table of device '{device.name}' is "
                    f"{source.split(':', 1)[1]} now; this study was scored from "
                    f"{cost.source.split(':', 1)[1]}: {new_study}"
                )
            if metric not in columns:
                columns[metric] = device.table(space.name, metric)
            now = float(columns[metric][space.index(space.parse(r.arch))])
            if not math.isclose(now, cost.value, rel_tol=1e-6):
                unit = cost.unit
                raise HwnasError(
                    f"the table of device '{device.name}' changed since this study was scored "
                    f"({r.arch}: {cost.value:.4g} {unit} in the study, {now:.4g} {unit} in "
                    f"{source.split(':', 1)[1]} now): {new_study}"
                )
    for metric in metrics:
        source = device.table_source(space.name, metric)
        if not source:
            continue
        for r in records:
            if metric in r.costs:
                continue
            if metric not in columns:
                columns[metric] = device.table(space.name, metric)
            column = columns[metric]
            if column is not None and math.isfinite(column[space.index(space.parse(r.arch))]):
                raise HwnasError(
                    f"device '{device.name}' has a table of {metric} now "
                    f"({source.split(':', 1)[1]}) that this study was scored without ({r.arch} "
                    f"has no {metric}): {new_study}"
                )


def device_costs(
    profiler: Profiler, workload, metrics: list[str], required: int = 1
) -> dict[str, CostRecord]:
    """Every metric of ``workload`` through ``profiler`` (store-cached): metric -> its record,
    a timed latency judged against the device protocol's precision target. The first
    ``required`` metrics must have a value (the objective's, and latency under a latency
    limit); a later one a recorded table lacks is left out (an energy search on a device
    whose latency table is partial skipped every architecture without a latency), and so is
    the energy of a meter that counts nothing (a latency search on a VM whose RAPL counter is
    frozen stopped after 5 candidates; the profiler warns once).

    Raises:
        UnrecordedError: a table lacks a required metric of the workload.
        MeterReadingError: the meter counted no energy, and energy is required.
    """
    target = precision_target(profiler.device)
    out: dict[str, CostRecord] = {}
    for i, m in enumerate(metrics):
        try:
            out[m] = CostRecord.of_measurement(profiler.measure(workload, m), target)
        except UnrecordedError:
            if i < required:
                raise
        except MeterReadingError as exc:
            if i < required:
                raise
            profiler.drop_energy(exc)  # said once
    return out


# -- accuracy from the user's function -------------------------------------------------------

AccuracyFunction = Callable[..., float]
"""The evaluator protocol: a function scoring one network, returning top-1 accuracy in % (0-100).

Two forms, told apart by how many positional parameters the function takes:

- ``fn(model, arch) -> float``: ``model`` is the candidate as a ``torch.nn.Module`` (eval mode,
  on the CPU: its inherited weights for a supernet or an elastic model, batch norm recalibrated
  where hwnas has training data), ``arch`` the :class:`~hwnas.spaces.base.Arch` (``arch.text``
  is its arch string). The function owns its data (a ``torch.utils.data.DataLoader`` it closes
  over, a validation set, a remote evaluation).
- ``fn(model, arch, data) -> float``: also given the search's
  :class:`hwnas.datasets.DataSplits` (numpy ``data.train``, ``data.val``, ``data.test`` with
  ``.x`` (N, C, H, W) float32 and ``.y`` (N,) int64;
  :func:`hwnas.loops.batches` gives torch mini-batches).

It may train the model (a short fine-tune: :func:`hwnas.loops.finetune_subnet`) before
scoring it. A value outside [0, 100] or not a finite number is refused (a fraction such as
0.93 is read as 0.93 %, so return percent)."""


def accuracy_function(fn: Any) -> Callable[[Any, Arch, Any], float]:
    """``fn`` (either form of :data:`AccuracyFunction`) as ``(model, arch, data) -> float`` with
    its result checked.

    Raises:
        HwnasError: ``fn`` is not a function (a network is refused) or takes neither 2 nor 3
            positional arguments (now); an error raised by ``fn``, or a result that is not a
            finite number in [0, 100] (when called; one line naming the function and the
            architecture).
    """
    import inspect
    import math

    from hwnas.errors import HwnasError

    if getattr(fn, "checked", False):  # already this function's result: not wrapped twice
        return fn
    if not callable(fn):
        raise HwnasError(f"the accuracy function must be callable, got {type(fn).__name__}")
    if hasattr(fn, "forward"):  # a network is callable too, but it is not scored by calling
        raise HwnasError(
            f"the accuracy function must be a function (model, arch[, data]) -> %, got the "
            f"network {type(fn).__name__}"
        )
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        params = None
    takes_data, needs_data = True, False
    if params is not None:
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        star = any(p.kind == p.VAR_POSITIONAL for p in params)
        required = [p for p in positional if p.default is p.empty]
        if not star and not (len(required) <= 2 <= len(positional) or len(required) == 3):
            raise HwnasError(
                f"the accuracy function {name} must take (model, arch) or (model, arch, data); "
                f"it takes {len(positional)} positional argument(s)"
            )
        takes_data = star or len(positional) >= 3
        needs_data = len(required) >= 3  # data without a default: None would fail in it

    def call(model: Any, arch: Arch, data: Any = None) -> float:
        try:
            value = fn(model, arch, data) if takes_data else fn(model, arch)
        except HwnasError:
            raise
        except SystemExit as exc:  # ended the search silently, with the status it gave (0 too)
            code = "" if exc.code is None else repr(exc.code)
            raise HwnasError(
                f"the accuracy function {name} called sys.exit({code}) on {arch.text}: it must "
                "return the accuracy (%), not end the program"
            ) from None
        except Exception as exc:  # the user's code: any error, in one line
            first = (str(exc).strip().splitlines() or [""])[0]
            raise HwnasError(
                f"the accuracy function {name} failed on {arch.text}: {type(exc).__name__}: {first}"
            ) from exc  # the one line for the CLI; the user's traceback for Python
        given = value
        if hasattr(value, "detach"):  # a tensor that needs grad: float() would warn
            value = value.detach()
        if hasattr(value, "item") and hasattr(value, "reshape"):  # one value of an array
            try:
                flat = value.reshape(-1)
                value = flat[0].item() if len(flat) == 1 else value
            except Exception:  # noqa: BLE001 - not an array after all: float() decides
                pass
        if isinstance(value, (str, bytes, bytearray, bool)):  # float("55"), float(True) pass
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise HwnasError(
                f"the accuracy function {name} returned the {type(given).__name__} {shown} "
                f"for {arch.text}: it must return top-1 accuracy in % (a number from 0 to 100)"
            )
        try:
            number = float(value)
        except (TypeError, ValueError, RuntimeError):  # RuntimeError: a tensor of 2 values
            number = float("nan")
        if not math.isfinite(number) or not 0.0 <= number <= 100.0:
            raise HwnasError(
                f"the accuracy function {name} returned {value!r} for {arch.text}: it must "
                "return top-1 accuracy in % (a number from 0 to 100)"
            )
        return number

    call.label = name  # type: ignore[attr-defined]
    call.checked = True  # type: ignore[attr-defined]
    call.needs_data = needs_data  # type: ignore[attr-defined]
    return call


_ACCURACY: dict[str, Any] = {}
"""Accuracy functions registered as objects (:func:`register_accuracy`), by label."""


def register_accuracy(fn: Any) -> str:
    """Make the accuracy function ``fn`` (:data:`AccuracyFunction`) findable in this process by
    its label, the function's qualified name, which the search's settings (and study name)
    carry. A function registered earlier under the same label is replaced (a notebook cell run
    again).

    Returns:
        The label.

    Raises:
        HwnasError: ``fn`` is not callable or takes neither 2 nor 3 positional arguments.
    """
    label = accuracy_function(fn).label  # type: ignore[attr-defined]
    _ACCURACY[label] = fn
    return label


def accuracy_code_digest(label: str) -> str | None:
    """A digest of the accuracy function registered as ``label`` (:func:`register_accuracy`):
    its bytecode, constants (nested functions' too) and the names it reads, and the values it
    works with: its defaults, its closure's cells, the module globals it reads, a
    ``functools.partial``'s function and arguments, a callable object's attributes; not where
    it was defined. None for a label not registered in this process (``path/to/file.py:
    function``: the file's digest stands for it). A function edited and run again, another
    lambda, or the same function over other values (a threshold in its closure, a global
    ``SCALE``, ``partial(f, scale=2)``, ``Acc(20.0)``) is another search's: it must not resume
    a study of the old one's scores.

    Values enter by content where they are plain (numbers, strings, bytes, None, containers of
    them, numpy arrays and CPU tensors up to 16M elements), else by their type alone (a data
    loader, a model): what cannot be read stably from one process to the next never splits a
    study that a rerun should resume."""
    import functools
    import hashlib

    fn = _ACCURACY.get(label)
    if fn is None:
        return None
    digest = hashlib.sha256()
    seen: set[int] = set()

    def feed_code(c: Any) -> None:
        digest.update(c.co_code)
        digest.update(repr(c.co_names).encode())
        for const in c.co_consts:
            if hasattr(const, "co_code"):  # a nested function or comprehension
                feed_code(const)
            else:
                digest.update(repr(const).encode())

    def feed_callable(f: Any, depth: int) -> bool:
        if id(f) in seen or depth > 3:
            return True
        seen.add(id(f))
        if isinstance(f, functools.partial):
            digest.update(b"partial")
            feed_value(f.args, depth)
            feed_value(f.keywords, depth)
            return feed_callable(f.func, depth + 1)
        code = getattr(f, "__code__", None)
        if code is None:  # an object with a __call__ method: that method, and its attributes
            call = vars(type(f)).get("__call__")
            if getattr(call, "__code__", None) is None:
                return False  # a builtin or a C-level callable: its name is all there is
            feed_callable(call, depth + 1)
            feed_value(getattr(f, "__dict__", {}), depth)
            return True
        feed_code(code)
        feed_value(getattr(f, "__defaults__", None), depth)
        feed_value(getattr(f, "__kwdefaults__", None), depth)
        for cell in getattr(f, "__closure__", None) or ():
            try:
                feed_value(cell.cell_contents, depth)
            except ValueError:  # a cell not yet filled
                digest.update(b"<empty cell>")
        names = getattr(f, "__globals__", {})
        for name in _names_read(code):
            if name in names:
                digest.update(name.encode())
                feed_value(names[name], depth)
        return True

    def feed_value(value: Any, depth: int) -> None:
        if callable(value) and (hasattr(value, "__code__") or isinstance(value, functools.partial)):
            if not feed_callable(value, depth + 1):
                digest.update(type(value).__qualname__.encode())
            return
        digest.update(_plain(value).encode())

    if not feed_callable(fn, 0):
        return None
    return digest.hexdigest()[:16]


def _names_read(code: Any) -> list[str]:
    """The global names a code object (and the functions it defines) reads."""
    out = list(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            out += _names_read(const)
    return out


_PLAIN_ELEMENTS = 16 * 2**20
"""Elements of an array or tensor whose content enters an accuracy function's digest (larger:
its shape and dtype only)."""


def _plain(value: Any, depth: int = 0) -> str:
    """A text that is the same for equal plain values in any process: numbers, strings, bytes,
    None and containers of them by content, numpy arrays and CPU tensors by a hash of their
    bytes; anything else (a module, a data loader, a model) by its type alone."""
    import hashlib

    import numpy as np

    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return repr(value)
    if isinstance(value, (bytes, bytearray)):
        return f"bytes:{hashlib.sha256(bytes(value)).hexdigest()}"
    if isinstance(value, np.generic):
        return repr(value.item())
    if depth < 4 and isinstance(value, (tuple, list)) and len(value) <= 10_000:
        return f"{type(value).__name__}[{','.join(_plain(v, depth + 1) for v in value)}]"
    if depth < 4 and isinstance(value, (set, frozenset)) and len(value) <= 10_000:
        return f"set[{','.join(sorted(_plain(v, depth + 1) for v in value))}]"
    if depth < 4 and isinstance(value, dict) and len(value) <= 10_000:
        items = sorted(f"{_plain(k, depth + 1)}:{_plain(v, depth + 1)}" for k, v in value.items())
        return f"dict{{{','.join(items)}}}"
    array = value
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        try:
            array = value.detach().cpu().numpy() if value.device.type == "cpu" else None
        except Exception:  # noqa: BLE001 - a tensor numpy cannot hold: its type alone
            array = None
    if isinstance(array, np.ndarray) and array.dtype != object:
        if array.size <= _PLAIN_ELEMENTS:
            data = np.ascontiguousarray(array).tobytes()
            return f"array{array.shape}{array.dtype}:{hashlib.sha256(data).hexdigest()}"
        return f"array{array.shape}{array.dtype}"
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def get_accuracy(label: str) -> Callable[[Any, Arch, Any], float]:
    """The accuracy function of ``label``: one registered by :func:`register_accuracy`, or
    ``path/to/file.py:function`` (``hwnas search --accuracy``; the file is imported, once per
    process: :mod:`hwnas.usercode`), checked by :func:`accuracy_function`.

    Raises:
        HwnasError: a file that cannot be imported, an object that is not such a function.
        UnknownNameError: no function of that label (or no such name in the file).
    """
    from hwnas.errors import HwnasError, UnknownNameError
    from hwnas.usercode import CODE, code_object

    if label in _ACCURACY:
        fn = _ACCURACY[label]
    elif CODE.match(label):
        fn = code_object(label)
    elif _ACCURACY:
        raise UnknownNameError("accuracy function", label, list(_ACCURACY))
    else:
        raise HwnasError(
            f"unknown accuracy function '{label}': give path/to/file.py:function, or the "
            "function itself from Python"
        )
    checked = accuracy_function(fn)
    checked.label = label  # type: ignore[attr-defined]
    return checked


FUNCTION_TRAINED = "the function changed the weights (trained the network)"
"""How the ``accuracy_source`` of a network the user's accuracy function changed the weights
of ends (:meth:`FunctionEvaluator.source`): a later process knows the zoo must ship that
network as the function left it, not the candidate built again."""

INHERITED_NOTE = "inherited from the space's network"
"""How a zoo card's weights note of a subnet scored on its inherited weights begins."""

FUNCTION_NOTE = "as your accuracy function left it"
"""How a zoo card's weights note of a network the accuracy function trained begins."""


class FunctionEvaluator:
    """Accuracy from the user's function (:data:`AccuracyFunction`), costs from a device via a
    profiler: a table search's evaluator for spaces without an accuracy table, and for a
    user's own model made elastic (:func:`hwnas.elastic`).

    The candidate is the space's network of the architecture: its subnet with the inherited
    weights where the space has them (:class:`hwnas.spaces.InheritedSpace`), else a freshly
    built one (``space.build``; the function then trains it); with ``data``, batch norm is
    recalibrated on its training split first (Once-for-All's step before scoring a subnet).

    Args:
        space: the search space.
        accuracy: the user's function.
        profiler: device + store.
        metrics: device metrics to obtain for each architecture (the objective's first).
        dataset: the space's dataset whose network is measured.
        data: the data handed to the function (``fn(model, arch, data)``) and used for batch
            norm recalibration, or None.
        recalibrate: recalibrate batch norm on ``data.train`` before calling the function.

    Attributes:
        instant: False (the function runs).
        accuracy_queries: calls of the function so far (the search's).
        scores: architecture string -> accuracy (%) as the function returned it.
        trained: architecture string -> the network as the function left it, where it changed
            the weights, for those scored in this process that no other beats in accuracy
            and every cost (the zoo ships them: :meth:`zoo_models`).
        untouched: the architectures scored in this process whose weights the function left.
        rescored: front networks scored again for the zoo (scored in another process).
    """

    instant = False

    def __init__(
        self,
        space: SearchSpace,
        accuracy: Any,
        profiler: Profiler,
        metrics: list[str],
        dataset: str,
        data: Any = None,
        recalibrate: bool = True,
        required: int = 1,
    ):
        from hwnas.spaces import InheritedSpace, ability

        self.space = space
        self.fn = accuracy_function(accuracy)
        self.profiler = profiler
        self.metrics = [m for m in metrics if m in METRICS]
        self.required = required
        self.dataset = dataset
        self.data = data
        self.recalibrate = recalibrate
        self._inherited = ability(space, InheritedSpace)
        self.accuracy_queries = 0
        self.scores: dict[str, float] = {}
        self.trained: dict[str, Any] = {}
        self.untouched: set[str] = set()
        self.rescored = 0
        self._points: dict[str, tuple[float, dict[str, float]]] = {}

    def model(self, arch: Arch):
        """The candidate network of ``arch`` as the function gets it (see the class doc)."""
        from hwnas.loops import recalibrate_bn

        if self._inherited is not None:
            model = self._inherited.subnet(arch)
        else:
            model = self.space.build(arch, self.dataset)
        if self.data is not None and self.recalibrate:
            recalibrate_bn(model, model, self.data.train)
        return model.eval()

    def _score(self, arch: Arch) -> tuple[Any, float, bool]:
        """The candidate of ``arch`` built and scored by the function, the global generators
        seeded from the architecture (:func:`hwnas.engine.seeding.seeded_globals`), so that
        the same architecture gets the same network (and, for a function that trains with
        them, the same training): (the network as the function left it, its accuracy, whether
        the function changed its weights)."""
        from hwnas.engine.seeding import CANDIDATE, derive_seed, seeded_globals

        with seeded_globals(derive_seed(0, CANDIDATE, arch.text)):
            model = self.model(arch)
            before = weights_digest(model)
            acc = self.fn(model, arch, self.data)
        return model, acc, weights_digest(model) != before

    def _candidate(self, arch: Arch):
        """The candidate of ``arch`` as the function got it, built again (the same seed)."""
        from hwnas.engine.seeding import CANDIDATE, derive_seed, seeded_globals

        with seeded_globals(derive_seed(0, CANDIDATE, arch.text)):
            return self.model(arch)

    def _keep(self, ev: Evaluation, model: Any, changed: bool) -> None:
        """Remember what the zoo needs of the scored ``ev``: the network the function left
        where it changed the weights (:attr:`trained`), only while no architecture scored in
        this process beats it in accuracy and every cost (none such can be on the front), so
        that memory holds about the front's networks, not every candidate's."""
        point = (ev.accuracy, {m: c.value for m, c in ev.costs.items()})
        self._points[ev.arch.text] = point
        if not changed:
            self.untouched.add(ev.arch.text)
            self.trained.pop(ev.arch.text, None)
            return
        self.untouched.discard(ev.arch.text)
        if not any(_dominates(p, point) for p in self._points.values()):
            self.trained[ev.arch.text] = model.cpu()
        for text in [t for t in self.trained if _dominates(point, self._points[t])]:
            del self.trained[text]

    def zoo_models(self, records: Sequence[Any]) -> dict[str, dict[str, Any]] | None:
        """arch string -> the network the function scored, for the zoo
        (:func:`hwnas.zoo.write_zoo`'s ``trained``; it asks only for the entries it does not
        keep from the run folder's zoo, which an earlier run wrote), for each of ``records``
        (:class:`hwnas.engine.loop.TrialRecord`):

        - where the function changed the weights (trained the network): the network as it
          left it, kept since it was scored in this process (:meth:`_keep`); one scored in
          another process (a resumed search, another worker), or no longer kept, is scored
          again now, the same seed, so that the zoo ships a network whose weights and score
          it knows (a function that trains trains it again; a score other than the search's
          is the card's, which says so);
        - where it left them: the subnet with the inherited weights, built again (the same
          seed: the same network). A freshly built network is not among them: the zoo
          exports the space's network with random weights, as for any space.

        Whether the function changed a network's weights is in its record's
        ``accuracy_source`` (:data:`FUNCTION_TRAINED`), so a later process knows it too.
        Each entry's ``weights`` note starts with :data:`INHERITED_NOTE` or
        :data:`FUNCTION_NOTE` (:func:`hwnas.zoo.read.zoo_weights` tells them apart). None when
        there is none.
        """
        spec = self.space.dataset(self.dataset)
        out = {}
        for record in records:
            text = record.arch
            arch = self.space.parse(text)
            rescored = None
            if text in self.trained:
                model, changed = self.trained[text], True
            elif text in self.untouched:
                model, changed = None, False
            elif FUNCTION_TRAINED not in str(record.attrs.get("accuracy_source", "")):
                model, changed = None, False  # scored elsewhere: the function left them
            else:
                model, rescored, changed = self._score(arch)
                self.rescored += 1
            if not changed and self._inherited is None:
                continue  # random weights, scored untrained: exported as any space's network
            if not changed:
                model = model if model is not None else self._candidate(arch)
                weights = f"{INHERITED_NOTE} ({self.source()})"
            else:
                model = model.cpu().float().eval()
                start = "a fresh network" if self._inherited is None else "its inherited weights"
                weights = (
                    f"{FUNCTION_NOTE}: it changed the weights (trained the network) from "
                    f"{start} before scoring it ({self.source(changed=True)})"
                )
                if getattr(model, "hwnas_build", None) is None:  # a freshly built one
                    model.hwnas_build = {
                        "kind": "space",
                        "space": self.space.name,
                        "arch": arch.text,
                        "dataset": self.dataset,
                        "num_classes": spec.num_classes,
                    }
            entry: dict[str, Any] = {
                "model": model,
                "input_shape": (1, *spec.input_shape),
                "num_classes": spec.num_classes,
                "dataset": self.dataset,
                "weights": weights,
            }
            if rescored is not None:
                entry["weights"] += (
                    "; scored again as the zoo was written, the search having scored it in "
                    "another process"
                )
                if rescored != record.accuracy:
                    entry["accuracy"] = {
                        "value": float(rescored),
                        "source": (
                            f"{self.source(changed=True)}, scored again as the zoo was written "
                            f"(the search scored an earlier training {record.accuracy:.2f}%)"
                        ),
                        "split": "the accuracy function's",
                        "kind": "measured",
                    }
            if self.data is not None:
                entry["data"] = self.data
            out[text] = entry
        return out or None

    def source(self, changed: bool = False) -> str:
        """Where the accuracy comes from, for ``accuracy_source``; ``changed``: the function
        changed the network's weights while scoring it (:data:`FUNCTION_TRAINED` added)."""
        weights = "inherited weights" if self._inherited is not None else "a fresh network"
        recal = (
            f", batch norm recalibrated on {len(self.data.train)} {self.data.name} images"
            if self.data is not None and self.recalibrate
            else ""
        )
        trained = f"; {FUNCTION_TRAINED}" if changed else ""
        return f"function:{self.fn.label} on {weights}{recal}{trained}"  # type: ignore[attr-defined]

    def check_resumed(self, records: list[Any]) -> None:
        """:func:`check_recorded_costs` on the profiler's device."""
        check_recorded_costs(self.profiler.device, self.space, records, self.metrics)

    def evaluate(self, arch: Arch) -> Evaluation:
        """Call the function on the candidate once and obtain every metric (store-cached).
        The network is built and scored with the global generators seeded from the
        architecture (:func:`hwnas.engine.seeding.seeded_globals`); where the function
        changed its weights, the network it left is kept for the zoo while it may be on the
        front (:meth:`zoo_models`)."""
        self.accuracy_queries += 1
        model, acc, changed = self._score(arch)
        self.scores[arch.text] = acc
        workload = arch_workload(self.space, arch, self.dataset)
        costs = device_costs(self.profiler, workload, self.metrics, self.required)
        ev = Evaluation(arch, acc, self.source(changed), costs, workload.model_hash)
        self._keep(ev, model, changed)
        return ev


def weights_digest(model: Any) -> str:
    """A digest of ``model``'s parameters and buffers (names, dtypes, shapes, values): whether
    the user's accuracy function changed them (trained the network) while scoring it."""
    import hashlib

    import torch

    h = hashlib.blake2b(digest_size=16)
    for k, v in model.state_dict().items():
        h.update(k.encode())
        if isinstance(v, torch.Tensor):
            t = v.detach()
            t = t.dequantize() if t.is_quantized else t
            t = t.cpu().contiguous().reshape(-1)
            h.update(f"{t.dtype}{tuple(v.shape)}".encode())
            h.update(t.view(torch.uint8).numpy())
        else:  # a module's extra state
            h.update(repr(v).encode())
    return h.hexdigest()


def _dominates(a: tuple[float, dict[str, float]], b: tuple[float, dict[str, float]]) -> bool:
    """Whether the scored point ``a`` (accuracy, metric -> cost) beats ``b``: at least as
    accurate and as cheap in every cost, better in one (costs of other metrics: never)."""
    (acc_a, costs_a), (acc_b, costs_b) = a, b
    if set(costs_a) != set(costs_b) or acc_a < acc_b:
        return False
    if any(costs_a[m] > costs_b[m] for m in costs_a):
        return False
    return acc_a > acc_b or any(costs_a[m] < costs_b[m] for m in costs_a)
