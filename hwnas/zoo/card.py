"""Model cards of zoo entries: ``card.json``, the ``README.md`` a person reads, and the ONNX
``metadata_props`` carrying the same keys.

The README follows the Hugging Face / timm model-card layout: YAML front matter (``license``,
``library_name``, ``pipeline_tag``, ``tags``, ``datasets``, ``metrics`` and a ``model-index``
of what this file scores, each result naming its source), then a body: what the model is, its
accuracy and latency with the origin of each number, how to run it with ONNX Runtime, its
preprocessing, how it was trained, and the checksums. What the card says of the input (task,
layout, the example's batch and normalisation) follows the network's input: images (N, C, H, W)
of any channel count, 1-D signals (N, C, L), feature vectors (N, F). Nothing here imports torch.
"""

from __future__ import annotations

import json
import platform
from importlib import metadata
from typing import Any

from hwnas.cost_record import unit_of
from hwnas.datasets import chance_verdict
from hwnas.export import OPSET

CARD_VERSION = 1
"""Version of the ``card.json`` layout (``format_version``)."""

CARD_FILE = "card.json"
README_FILE = "README.md"
MODEL_FILE = "model.onnx"
WEIGHTS_FILE = "weights.pt"
TEST_DATA = "test_data_set_0"

RTOL = 1e-3
ATOL = 1e-4
"""Tolerance of ``hwnas zoo verify``: ONNX Runtime's output on the stored input against the
stored PyTorch output, ``|got - expected| <= ATOL + RTOL * |expected|`` elementwise (float32
kernels of the two libraries differ by about 1e-6 on these logits)."""

LICENSE = "mit"
LICENSE_NOTE = (
    "MIT, the licence of hwnas, which built and exported this network. The architecture "
    "comes from its search space's benchmark (see NOTICE of hwnas); weights trained on your "
    "data are subject to that data's terms as well."
)
OWN_SPACE_LICENSE_NOTE = (
    "MIT, the licence of hwnas, which built and exported this network. The architecture "
    "comes from search space {space}, not from data hwnas ships; weights trained on your "
    "data are subject to that data's terms as well."
)
"""The licence note of a network of a space without a benchmark (a user's space file):
:data:`LICENSE_NOTE` would point at a NOTICE that names none of its data."""


OWN_MODEL_LICENSE_NOTE = (
    "Unknown to hwnas: the architecture and its weights derive from the model made elastic as "
    "search space {space} (hwnas.elastic), whose licence applies; hwnas cut it to this subnet "
    "and exported it."
)
"""The licence note of a subnet of a user's own model: neither MIT nor NOTICE covers it."""


def license_of(space: Any, benchmark: bool) -> tuple[str, str]:
    """The card's ``license`` and ``license_note`` for a network of ``space`` (a
    :class:`hwnas.spaces.SearchSpace`): MIT and :data:`LICENSE_NOTE` where the space comes from
    a benchmark hwnas ships data of (NOTICE); for a subnet of the user's own model (an
    :class:`hwnas.spaces.base.InheritedSpace`), ``other`` and :data:`OWN_MODEL_LICENSE_NOTE`
    (the model's own licence, which hwnas cannot know); else (a user's space file) MIT and
    :data:`OWN_SPACE_LICENSE_NOTE`."""
    from hwnas.spaces import ability
    from hwnas.spaces.base import InheritedSpace

    if benchmark:
        return LICENSE, LICENSE_NOTE
    if ability(space, InheritedSpace) is not None:
        return "other", OWN_MODEL_LICENSE_NOTE.format(space=space.name)
    return LICENSE, OWN_SPACE_LICENSE_NOTE.format(space=space.name)


BENCHMARK_PREPROCESSING: dict[str, dict[str, Any]] = {
    # AutoDL-Projects (NAS-Bench-201's code), xautodl/datasets/get_dataset_with_transform.py
    "cifar10": {
        "mean": [125.3 / 255, 123.0 / 255, 113.9 / 255],
        "std": [63.0 / 255, 62.1 / 255, 66.7 / 255],
        "source": "NAS-Bench-201 code (AutoDL-Projects get_datasets)",
    },
    "cifar100": {
        "mean": [129.3 / 255, 124.1 / 255, 112.4 / 255],
        "std": [68.2 / 255, 65.4 / 255, 70.4 / 255],
        "source": "NAS-Bench-201 code (AutoDL-Projects get_datasets)",
    },
    "imagenet16": {
        "mean": [122.68 / 255, 116.66 / 255, 104.01 / 255],
        "std": [63.22 / 255, 61.26 / 255, 65.09 / 255],
        "source": "NAS-Bench-201 code (AutoDL-Projects get_datasets, ImageNet16-120)",
    },
    "imagenet": {
        "mean": [0.485, 0.456, 0.406],
        "std": [0.229, 0.224, 0.225],
        "source": "the ImageNet statistics of torchvision and the OFA/FBNet code",
    },
}
"""Per-channel statistics (after scaling pixels to [0, 1]) of the benchmark datasets: how the
benchmark's networks were fed, so the preprocessing of a random-weight entry for training."""

TOOLS = ("hwnas", "torch", "onnx", "onnxruntime", "numpy")

LAYOUTS: dict[int, tuple[str, tuple[str, ...]]] = {
    2: ("NF", ("batch", "features")),
    3: ("NCL", ("batch", "channels", "length")),
    4: ("NCHW", ("batch", "channels", "height", "width")),
    5: ("NCDHW", ("batch", "channels", "depth", "height", "width")),
}
"""Rank of a network's input -> its layout (the card's ``input.layout`` and
``preprocessing.layout``) and the names of its axes: (N, F) feature vectors of a tabular
model, (N, C, L) signals of a 1-D convolutional model (audio, sensors; PyTorch's ``Conv1d``
names the axis L), (N, C, H, W) images."""

HF_TASKS = ("image-classification", "tabular-classification", "audio-classification")
"""Tasks that are Hugging Face pipeline tags: the README's ``pipeline_tag`` names one of these
only (another task is in ``card.json`` and the model-index, not offered as a pipeline)."""


def input_layout(shape: tuple[int, ...] | list[int]) -> tuple[str, tuple[str, ...]]:
    """The layout and axis names of an input of ``shape`` (batch first), by its rank
    (:data:`LAYOUTS`; another rank: ``N`` and numbered axes)."""
    rank = len(shape)
    if rank in LAYOUTS:
        return LAYOUTS[rank]
    return "N" + "".join(f"D{i}" for i in range(1, rank)), (
        "batch", *(f"dim{i}" for i in range(1, rank))
    )  # fmt: skip


def input_task(shape: tuple[int, ...] | list[int]) -> str:
    """The card's ``task`` for a classifier of inputs of ``shape``: ``image-classification``
    for (N, C, H, W), ``tabular-classification`` for (N, F) feature vectors, else
    ``classification`` (a space declares what its data is only by its shape: a (N, C, L)
    network may classify sounds, sensor signals or any sequence)."""
    rank = len(shape)
    if rank == 4:
        return "image-classification"
    if rank == 2:
        return "tabular-classification"
    return "classification"


def is_image(card: dict[str, Any]) -> bool:
    """Whether ``card`` is of an image classifier (an (N, C, H, W) input; cards written before
    ``task`` named other inputs all are)."""
    return len(card["input"]["shape"]) == 4


def tool_versions() -> dict[str, str]:
    """Versions of the tools that build, export and check zoo models (from package metadata,
    without importing them), and Python's."""
    out = {}
    for name in TOOLS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["python"] = platform.python_version()
    return out


def chance_section(accuracy: dict[str, Any], num_classes: int) -> dict[str, Any]:
    """The card's ``chance_level`` section for its ``accuracy`` section: judged on the accuracy
    the search chose it on, as ``pareto.csv`` and the zoo's export are
    (:func:`hwnas.datasets.chance_verdict`), naming the split it judged."""
    return chance_verdict(accuracy, num_classes)


def card_for(
    *,
    name: str,
    space: str,
    arch: str,
    benchmark_dataset: str,
    params: int,
    flops: int,
    input_shape: tuple[int, ...],
    dataset: str,
    num_classes: int,
    labels: list[str] | None,
    label_order: str,
    preprocessing: dict[str, Any],
    accuracy: dict[str, Any],
    weights: dict[str, Any],
    devices: dict[str, dict[str, dict[str, Any]]],
    devices_note: str,
    device: str | None = None,
    table_accuracy: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
    test_label: int | None = None,
    study: str | None = None,
    trial: int | None = None,
    build: dict[str, Any] | None = None,
    task: str | None = None,
    license_note: str = LICENSE_NOTE,
    license: str = LICENSE,
    graph_signature: str | None = None,
) -> dict[str, Any]:
    """The card of one entry (``card.json`` without ``files``; :func:`hwnas.zoo.entry.
    write_entry` adds the checksums).

    Args:
        name: the entry's name (its folder name).
        space, arch: the architecture.
        benchmark_dataset: the space's dataset whose network this is (input shape, recorded
            latencies), e.g. ``cifar100``.
        params, flops: of this network as exported (:data:`PARAMS_CONVENTION`,
            :data:`FLOPS_CONVENTION`); ``input_shape`` with a batch of 1: (1, C, H, W) for
            images, (1, C, L) for 1-D signals, (1, F) for feature vectors; it sets the
            card's ``task`` (:func:`input_task`) and ``input.layout`` and ``input.axes``
            (:func:`input_layout`).
        dataset: what the weights and ``accuracy`` are for (``digits``, or the benchmark's
            dataset for random weights).
        num_classes: classifier outputs.
        labels: class names in output order, or None (random weights: nothing learnt).
        label_order: the label order in words.
        preprocessing: ``layout``, ``channel_order``, ``size``, ``scale``, ``resize``,
            ``mean``, ``std`` (one per input channel), ``steps``, ``source`` for images; for
            other inputs ``layout``, ``size`` (the input without batch), ``scale``, ``mean``
            and ``std`` (one per channel, or per feature of an (N, F) input; None: no
            normalisation known), ``steps``, ``source``.
        accuracy: ``value`` (%), ``source``, ``split``, ``kind`` (measured | benchmark table |
            function: what the search's accuracy function returned, which has no ``split``).
        weights: ``kind`` (trained | random), ``note``, ``file`` (``weights.pt`` or None).
        devices: device -> metric -> {``value``, ``source``}, the search's device first.
        devices_note: what network the device numbers are for.
        device: the device the search that found it optimised for (None: ``hwnas train``
            of an arch string).
        table_accuracy: the benchmark's accuracy of this architecture beside a measured one.
        training: the training section (:class:`hwnas.zoo.train.TrainedModel`), if trained
            by ``hwnas train``.
        test_label: the true label of the stored test input (a real image), if known.
        study, trial: the search that found it.
        build: how to rebuild the PyTorch module of the entry's weights (:func:`hwnas.zoo.load`):
            ``{"kind": "space", "space", "arch", "dataset", "num_classes", "seed"}`` (the
            space's network; ``seed``: the torch seed of random weights) or ``{"kind":
            "supernet", "space", "arch", "num_classes", "image_shape", "config"}`` (extracted
            from that supernet); each also holds ``fingerprint`` (:func:`build_fingerprint`),
            which :func:`hwnas.zoo.load` compares with the space's now.
        task: what the network does, as its space declares it (``SearchSpace.task``); None:
            :func:`input_task` of ``input_shape``.
        license_note: the licence in words, and ``license`` its Hugging Face identifier
            (:func:`license_of`).
        graph_signature: :func:`hwnas.export.graph_signature` of ``model.onnx`` (entries of
            one zoo with the same signature ship the same network: :func:`same_network`).
    """
    layout, axes = input_layout(input_shape)
    card: dict[str, Any] = {
        "format_version": CARD_VERSION,
        "name": name,
        "task": task or input_task(input_shape),
        "space": space,
        "arch": arch,
        "benchmark_dataset": benchmark_dataset,
        "dataset": dataset,
        "num_classes": num_classes,
        "labels": labels,
        "label_order": label_order,
        "input": {
            "name": "input",
            "shape": list(input_shape),
            "dtype": "float32",
            "layout": layout,
            "axes": list(axes),
            "dynamic_axes": {"0": "batch"},
        },
        "output": {
            "name": "logits",
            "shape": [input_shape[0], num_classes],
            "meaning": "unnormalised class scores (softmax gives probabilities)",
        },
        "preprocessing": preprocessing,
        "opset": OPSET,
        "params": int(params),
        "params_convention": PARAMS_CONVENTION,
        "flops": int(flops),
        "flops_convention": FLOPS_CONVENTION,
        "weights": weights,
        "accuracy": {"unit": "%", **accuracy},
        "chance_level": chance_section(accuracy, num_classes),
        "device": device,
        "devices": devices,
        "devices_note": devices_note,
        "license": license,
        "license_note": license_note,
        "tools": tool_versions(),
        "study": study,
        "trial": trial,
        "test_data": {
            "folder": TEST_DATA,
            "inputs": ["input_0.pb"],
            "outputs": ["output_0.pb"],
            "reference": "the PyTorch module's output on the input, before export",
            "label": test_label,
            "rtol": RTOL,
            "atol": ATOL,
        },
    }
    if graph_signature is not None:
        card["graph_signature"] = graph_signature
    if build is not None:
        card["build"] = build
    if table_accuracy is not None:
        card["table_accuracy"] = {"unit": "%", **table_accuracy}
    if training is not None:
        card["training"] = training
    return card


PARAMS_CONVENTION = (
    "the weights model.onnx holds (the elements of its floating-point initializers): layers "
    "whose results the network discards are not in it, and a batch norm that follows a "
    "convolution is folded into it"
)
FLOPS_CONVENTION = (
    "multiply-accumulates of the conv and linear layers model.onnx computes (those whose "
    "output reaches the network's output), batch 1"
)
"""What a card's ``params`` and ``flops`` count: the exported file's own (a NAS-Bench-201
cell's convolution whose result no edge takes to the output is executed by PyTorch, and was
counted, but the exporter leaves it out)."""


def same_network(names: list[str]) -> dict[str, Any]:
    """The card's ``same_network`` section of an entry whose ``model.onnx`` has the graph of
    the zoo's entries ``names`` (the same ``graph_signature``)."""
    return {
        "entries": sorted(names),
        "note": (
            f"model.onnx computes the same network as {_names(names)} (an identical ONNX "
            "graph, weights aside): this architecture's other operations compute results the "
            "network discards, and the export leaves them out, or its other widths round to "
            "the same channels at the supernet's reduced size. Where the device values of "
            "the entries differ, the difference is not of these files: a recorded table "
            "measured the benchmark's network, the discarded operations included, and a "
            "supernet search measured the full-size network it deploys. Ship one."
        ),
    }


def _names(names: list[str]) -> str:
    names = sorted(names)
    return f"entry {names[0]}" if len(names) == 1 else "entries " + ", ".join(names)


def build_fingerprint(space: Any, weights_file: bool) -> str:
    """The ``fingerprint`` a card's ``build`` section records of ``space``: its
    :attr:`~hwnas.spaces.base.SearchSpace.fingerprint` (a user's space file edited under the
    same name, an ``act`` added, is another network), or, for an entry whose ``weights.pt``
    holds every weight, its :attr:`~hwnas.spaces.base.SearchSpace.identity` (the structure
    alone: the two differ only for a model made elastic, whose own weights ``weights.pt``
    replaces). Both are the space's name for the shipped spaces."""
    return str(space.identity if weights_file else space.fingerprint)


def metadata_props(card: dict[str, Any]) -> dict[str, str]:
    """The ONNX ``metadata_props`` of an entry: every key of ``card.json`` but ``files`` (the
    checksums include model.onnx itself), strings as they are and other values as compact
    JSON with sorted keys."""
    return {k: _prop(v) for k, v in card.items() if k != "files"}


def _prop(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


# -- README.md ---------------------------------------------------------------------------------


def render_readme(card: dict[str, Any]) -> str:
    """The entry's ``README.md``: YAML front matter and a body a person reads.

    Args:
        card: the entry's card (``card.json`` without ``files``, or with it).

    Returns:
        Markdown text.
    """
    import yaml

    front = yaml.safe_dump(_front_matter(card), sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{front}---\n\n{_body(card)}"


def _front_matter(card: dict[str, Any]) -> dict[str, Any]:
    acc = card["accuracy"]
    device = card.get("device")
    devices = [device] if device in card.get("devices", {}) else []
    tags = ["hwnas", "neural-architecture-search", f"space:{card['space']}", "onnx"]
    tags += [f"device:{d}" for d in devices]
    tags.append(f"weights:{card['weights']['kind']}")
    if card["chance_level"]["value"]:
        tags.append("chance-level")
    # The model-index lists what this file scores. Random weights score nothing (card.json's
    # "accuracy" of such an entry is the benchmark's training of the architecture) and were
    # trained on no dataset; the benchmark's accuracy beside trained weights is another
    # network's (the benchmark's 200-epoch training). Both stay in the body, labelled.
    trained = card["weights"]["kind"] != "random"
    task = card.get("task", "image-classification")
    results = []
    if trained:
        results.append(
            _result(
                card["dataset"],
                acc.get("split", "test"),
                "accuracy",
                acc["value"],
                "top-1 accuracy (%)",
                acc["source"],
                task,
            )
        )
    for dev in devices:
        for metric, entry in file_values(card, dev).items():
            results.append(
                _result(
                    card["benchmark_dataset"],
                    None,
                    metric,
                    entry["value"],
                    f"{metric.split('_')[0]} on {dev} ({device_unit(metric, entry)})",
                    entry.get("source", ""),
                    task,
                    task_name=f"{dev}",
                )
            )
    metrics = sorted({m for d in devices for m in file_values(card, d)})
    front: dict[str, Any] = {"license": card["license"], "library_name": "onnx"}
    if task in HF_TASKS:  # a task that is no pipeline of Hugging Face's is offered as none
        front["pipeline_tag"] = task
    front |= {
        "tags": tags,
        "datasets": [card["dataset"]] if trained else [],
        "metrics": ["accuracy", *metrics] if trained else metrics,
    }
    if results:
        front["model-index"] = [{"name": card["name"], "results": results}]
    return front


OWN_MEASUREMENTS = ("measured:", "synthesised:")
"""How the source of a live device's value begins: hwnas measured (or synthesised) the
network it was handed."""


def file_values(card: dict[str, Any], device: str) -> dict[str, dict[str, Any]]:
    """The card's values on ``device`` that are of this file, metric -> entry: what the
    README's title and model-index may claim. A supernet search's entry (``build.kind``
    ``supernet``) is a proxy trained at the supernet's size: a recorded table's or a
    prediction's value is of the benchmark's network, and a live device's may be of the
    deployed network (then ``trained_subnet`` holds this file's own, which is given
    instead); only what was measured of this file is. Other entries are the network the
    device values are of (their ``devices_note`` says how)."""
    costs = (card.get("devices") or {}).get(device) or {}
    build = card.get("build") if isinstance(card.get("build"), dict) else {}
    if build.get("kind") != "supernet":
        return dict(costs)
    out = {}
    for metric, entry in costs.items():
        own = entry.get("trained_subnet")
        if isinstance(own, dict) and isinstance(own.get("value"), (int, float)):
            out[metric] = {**entry, "value": own["value"], "source": own.get("source", "")}
        elif str(entry.get("source", "")).startswith(OWN_MEASUREMENTS):
            out[metric] = entry
    return out


def _result(
    dataset: str,
    split: str | None,
    metric: str,
    value: float,
    name: str,
    source: str,
    task_type: str,
    task_name: str | None = None,
) -> dict[str, Any]:
    task: dict[str, Any] = {"type": task_type}
    if task_name:
        task["name"] = task_name
    data = {"name": dataset, "type": dataset}
    if split:
        data["split"] = split
    return {
        "task": task,
        "dataset": data,
        "metrics": [{"type": metric, "value": _round(value), "name": name}],
        "source": {"name": source},
    }


def _batch(entry: dict[str, Any]) -> int:
    """The batch a device value is of (1 unless the entry says another: a GPU table at 256)."""
    b = entry.get("batch_size", 1)
    return b if isinstance(b, int) and not isinstance(b, bool) and b > 1 else 1


def device_unit(metric: str, entry: dict[str, Any]) -> str:
    """The unit of a card's device value ("ms", "mJ", "ms per batch of 256"): the model
    index, the README and ``hwnas zoo show`` say it alike."""
    return unit_of(metric, _batch(entry))


def _round(v: Any) -> Any:
    return round(float(v), 4) if isinstance(v, (int, float)) else v


def _body(card: dict[str, Any]) -> str:
    w, acc = card["weights"], card["accuracy"]
    inp, out = card["input"], card["output"]
    device = card.get("device")
    title = f"{card['space']} model {card['name']}"
    if device and device in card.get("devices", {}):
        # the searched metric first (zoo.write.device_costs), where it is of this file
        costs = file_values(card, device)
        # random weights: the table's accuracy is the benchmark's, not this model's
        shown = f"{acc['value']:.1f}%" if w["kind"] != "random" else "random weights, untrained"
        if costs:
            metric, cost = next(iter(costs.items()))
            unit = device_unit(metric, cost)  # "ms per batch of 32" where the table is of 32
            shown = f"{cost['value']:.3g} {unit}, {shown}"
        title += f" for {device} ({shown})"
    lines = [f"# {title}", ""]
    origin = (
        f"found by `hwnas search` (study `{card['study']}`, trial {card['trial']})"
        if card.get("study")
        else "built by `hwnas train`"
    )
    image = is_image(card)
    layout, axes = input_layout(inp["shape"])
    things = "images" if image else _NOUNS.get(len(inp["shape"]), "tensors")
    kind = "An image classifier" if image else f"A classifier of {things}"
    one = "image" if image else "input"
    axes_note = "" if image else f" ({layout}: {', '.join(axes[1:])})"
    lines += [
        f"{kind} from the **{card['space']}** search space, {origin}: "
        f"architecture `{card['arch']}`, {card['params']:,} parameters, "
        f"{card['flops'] / 1e6:.1f} M multiply-accumulates per {one} (of what model.onnx "
        f"holds and computes). It takes "
        f"`{inp['name']}`, float32 {things} of shape (N, {', '.join(map(str, inp['shape'][1:]))})"
        f"{axes_note} and returns `{out['name']}`, shape (N, {card['num_classes']}): "
        f"{out['meaning']}.",
        "",
        f"**Weights: {w['kind']}.** {w['note']}",
        "",
    ]
    same = card.get("same_network")
    if isinstance(same, dict) and same.get("note"):
        lines += [f"**Same network:** {same['note']}", ""]
    if card["chance_level"]["value"]:
        judged = card["chance_level"].get("judged") or {"value": acc["value"]}
        on = f" on the {judged['split']} split" if judged.get("split") else ""
        lines += [
            f"**Chance-level:** its accuracy{on} ({judged['value']:.2f}%) is at most "
            f"{card['chance_level']['rule'].split('<=')[1].strip()} "
            f"(chance = {card['chance_level']['chance_accuracy']:g}%). Do not ship it.",
            "",
        ]
    lines += ["## Accuracy", "", "| top-1 % | data | where the number comes from |"]
    lines.append("|---|---|---|")
    split = f" ({acc['split']})" if acc.get("split") else ""
    lines.append(f"| {acc['value']:.2f} | {card['dataset']}{split} | {acc['source']} |")
    table = card.get("table_accuracy")
    if table:
        lines.append(f"| {table['value']:.2f} | {card['benchmark_dataset']} | {table['source']} |")
    lines.append("")
    devices = card.get("devices", {})
    if devices:
        lines += [
            "## Latency and energy per device",
            "",
            "| device | metric | value | where the number comes from |",
            "|---|---|---|---|",
        ]
        order = sorted(devices, key=lambda d: (d != device, d))  # the search's device first
        supernet = (card.get("build") or {}).get("kind") == "supernet"
        for dev in order:
            own = file_values(card, dev)
            for metric, entry in devices[dev].items():
                source = entry.get("source", "")
                if supernet and own.get(metric, {}).get("value") != entry["value"]:
                    source += " (another network's: see below)"
                unit = device_unit(metric, entry)
                lines.append(f"| {dev} | {metric} | {entry['value']:.4g} {unit} | {source} |")
                if supernet and metric in own and own[metric]["value"] != entry["value"]:
                    mine = own[metric]
                    lines.append(
                        f"| {dev} | {metric} (this file) | {mine['value']:.4g} {unit} | "
                        f"{mine.get('source', '')} |"
                    )
        lines += ["", card["devices_note"], ""]
    lines += [
        "## Run it with ONNX Runtime",
        "",
        *_run_snippet(card),
        "",
        "Check a deployment against the stored input and output (`test_data_set_0/`, ONNX Model "
        "Zoo layout) and the checksums with `hwnas zoo verify .`, or by hand:",
        "",
        "```python",
        "import numpy as np, onnx, onnxruntime as ort",
        "from onnx import numpy_helper",
        "",
        "load = lambda p: numpy_helper.to_array(onnx.load_tensor(p))",
        'x, y = load("test_data_set_0/input_0.pb"), load("test_data_set_0/output_0.pb")',
        'got = ort.InferenceSession("model.onnx").run(None, {"' + inp["name"] + '": x})[0]',
        f"np.testing.assert_allclose(got, y, rtol={card['test_data']['rtol']:g}, "
        f"atol={card['test_data']['atol']:g})",
        "```",
        "",
        "## Preprocessing",
        "",
        *(_image_preprocessing(card) if image else _other_preprocessing(card)),
        "",
    ]
    training = card.get("training")
    if training:
        lines += ["## Training", ""]
        lines += [f"- recipe: {training['recipe']['source']}"]
        applied = training["applied"]
        lines += [
            f"- applied: {applied['epochs']} epochs, batch {applied['batch_size']}, lr "
            f"{applied['lr']:g} ({training['recipe']['schedule']}), momentum "
            f"{training['recipe']['momentum']:g}"
            f"{' (Nesterov)' if training['recipe']['nesterov'] else ''}, weight decay "
            f"{training['recipe']['weight_decay']:g}, label smoothing "
            f"{training['recipe']['label_smoothing']:g}, seed {applied['seed']}, on "
            f"{applied['torch_device']} in {training['seconds']:.0f} s",
        ]
        lines += [f"- differs from the recipe: {d}" for d in training["deviations"]]
        data = training["data"]
        lines += [
            f"- data: {data['name']} ({data['source']}), trained on "
            f"{data['sizes']['train'] + data['sizes']['val']} images (train + validation "
            f"splits), tested on {data['sizes']['test']}, split seed {data['split_seed']}",
            "",
        ]
    lines += ["## Files", "", "| file | sha256 |", "|---|---|"]
    for name, digest in card.get("files", {}).items():
        lines.append(f"| `{name}` | `{digest}` |")
    lines += [
        "",
        "`card.json` holds these checksums and every fact above; `model.onnx` carries the same "
        "keys (but `files`) in its `metadata_props`.",
        "",
        "## Licence",
        "",
        card["license_note"],
        "",
        f"Tools: {', '.join(f'{k} {v}' for k, v in card['tools'].items())}.",
        "",
    ]
    return "\n".join(lines)


_NOUNS = {2: "feature vectors", 3: "1-D signals"}
"""What the README calls the inputs of a rank (an image's is ``images``)."""


def _normalisation(card: dict[str, Any]) -> tuple[list[float], list[float]] | None:
    """The preprocessing's ``mean`` and ``std``, where it states one of each per input channel
    (per feature of an (N, F) input), else None: nothing to apply."""
    pre, channels = card["preprocessing"], card["input"]["shape"][1]
    mean, std = pre.get("mean"), pre.get("std")
    if not (isinstance(mean, list) and isinstance(std, list)):
        return None
    return (mean, std) if len(mean) == len(std) == channels else None


def _run_snippet(card: dict[str, Any]) -> list[str]:
    """The README's ONNX Runtime example: a random batch of 4 of the input's shape, normalised
    per channel where the preprocessing states a mean and std for each."""
    inp, out = card["input"], card["output"]
    shape = [int(d) for d in inp["shape"]]
    image = is_image(card)
    layout, _axes = input_layout(shape)
    name = "images" if image else "x"
    norm = _normalisation(card)
    lines = [
        "```python",
        "import numpy as np",
        "import onnxruntime as ort",
        "",
        'session = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])',
    ]
    if norm is not None:
        view = ", ".join(["1", str(shape[1]), *["1"] * (len(shape) - 2)])
        lines += [
            f"mean = np.array({_floats(norm[0])}, np.float32).reshape({view})",
            f"std = np.array({_floats(norm[1])}, np.float32).reshape({view})",
        ]
    if image and norm is not None:
        comment = "yours: scaled to [0, 1], NCHW"
    elif image:
        comment = "yours: NCHW, prepared as in training"
    else:
        comment = f"yours: {layout}, prepared as in training"
    lines += [
        f"{name} = np.random.rand({', '.join(map(str, [4, *shape[1:]]))}).astype(np.float32)"
        f"  # {comment}",
        f'logits = session.run(["{out["name"]}"], {{"{inp["name"]}": '
        + (f"({name} - mean) / std" if norm is not None else name)
        + "})[0]",
        f"labels = {json.dumps(card['labels']) if card['labels'] else 'list(range(' + str(card['num_classes']) + '))'}",  # noqa: E501
        "print([labels[i] for i in logits.argmax(1)])",
        "```",
    ]
    return lines


def _image_preprocessing(card: dict[str, Any]) -> list[str]:
    """The README's preprocessing of an image classifier."""
    pre = card["preprocessing"]
    shape = "x".join(str(d) for d in card["input"]["shape"][1:])
    norm = _normalisation(card)
    stats = (
        f"- mean {_floats(norm[0])}, std {_floats(norm[1])} (per channel, after scaling)"
        if norm is not None
        else f"- mean {pre.get('mean')}, std {pre.get('std')}"
    )
    return [
        f"- input: {shape} ({pre['layout']}), channel order {pre['channel_order']}",
        f"- scale: {pre['scale']}; resize: {pre['resize']}",
        stats,
        f"- steps: {'; '.join(pre['steps'])}",
        f"- statistics from: {pre['source']}",
        f"- label order: {card['label_order']}",
    ]


def _other_preprocessing(card: dict[str, Any]) -> list[str]:
    """The README's preprocessing of a classifier of other inputs ((N, F), (N, C, L))."""
    pre, shape = card["preprocessing"], card["input"]["shape"]
    layout, axes = input_layout(shape)
    per = "feature" if len(shape) == 2 else "channel"
    norm = _normalisation(card)
    lines = [f"- input: {'x'.join(str(d) for d in shape[1:])} ({layout}: {' x '.join(axes[1:])})"]
    if pre.get("scale"):
        lines.append(f"- scale: {pre['scale']}")
    source = pre.get("source") or "not recorded"
    if norm is not None:
        mean, std = _floats(norm[0]), _floats(norm[1])
        lines.append(f"- normalisation: mean {mean}, std {std} (per {per})")
    else:
        lines.append(f"- normalisation: {source} (give the model its inputs as in its training)")
    lines.append(f"- steps: {'; '.join(pre.get('steps') or ['as in training'])}")
    if norm is not None:
        lines.append(f"- statistics from: {source}")
    lines.append(f"- label order: {card['label_order']}")
    return lines


def _floats(values: list[float]) -> str:
    return "[" + ", ".join(f"{float(v):.4f}" for v in values) + "]"
