"""ONNX export from several threads of one process (``hwnas.search`` run from a notebook's
threads): the exporter's state is process-wide, so exports are taken one at a time."""

from __future__ import annotations

import threading

import torch

from hwnas.export import export_onnx


def _net(width: int) -> torch.nn.Module:
    torch.manual_seed(width)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.BatchNorm2d(width), torch.nn.ReLU(),
        torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(width, 10),
    ).eval()  # fmt: skip


def test_exports_in_several_threads_each_give_the_serial_export():
    """Two searches in two threads died in their zoo export with torch's `AssertionError:
    GLOBALS.in_onnx_export must be True` (helper-57): one thread's export ended the other's."""
    widths = (8, 16, 24, 32)
    nets = {w: _net(w) for w in widths}  # built here: torch's seed is the process's too
    serial = {w: export_onnx(nets[w], (1, 3, 16, 16), check=False) for w in widths}
    got: dict[tuple[int, int], bytes] = {}
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for i in range(4):
                got[(w, i)] = export_onnx(nets[w], (1, 3, 16, 16), check=False)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in widths]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(got[(w, i)] == serial[w] for w in widths for i in range(4))
