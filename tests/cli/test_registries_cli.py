"""Registries drive the CLI (issue 19): a new runtime is one module plus its registration (no
list in the CLI or the devices names the runtimes, so ``hwnas measure --runtime`` takes one added
by a module alone), and ``--strategy``'s help is the registered strategies' descriptions."""

from __future__ import annotations

import importlib

import pytest

from hwnas.cli import main
from hwnas.runtimes import RUNTIMES

SMALL = "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"


@pytest.fixture
def plain_runtime():
    import tests.runtimes.plain_ort_runtime as module

    importlib.reload(module)  # registers it (again, after an earlier test's removal)
    yield module
    RUNTIMES.unregister("ort-plain")


def test_a_runtime_added_by_one_module_is_measured_through_the_cli(plain_runtime, capsys):
    assert main(["measure", "--help"]) == 0
    assert "[ort|ort-plain|tvm]" in capsys.readouterr().out  # the choices are the registry's
    measure = ["measure", "-d", "cpu-fast", "--arch", SMALL]

    def run(*extra: str) -> str:
        code = main([*measure, *extra])
        out = capsys.readouterr()
        assert code == 0, out.err
        return " ".join((out.out + out.err).split())

    first = run("--runtime", "ort-plain")
    assert "cpu-fast (ort-plain)" in first and "1 measured, 0 from the store" in first, first
    again = run("--runtime", "ort-plain")  # stored under the new runtime's key
    assert "0 measured, 1 from the store" in again, again
    ort = run()  # the profile's runtime: its own measurement, never the new runtime's
    assert "cpu-fast (ort)" in ort and "1 measured, 0 from the store" in ort, ort


def test_an_unregistered_runtime_is_one_line_with_the_registered_ones(capsys):
    assert main(["measure", "-d", "cpu-fast", "--runtime", "ort-plian", "--arch", SMALL]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown runtime 'ort-plian'" in err[0] and "ort, tvm" in err[0]


def test_strategy_help_lists_every_registered_strategy_with_its_description(capsys):
    from hwnas.engine.strategies import STRATEGIES

    STRATEGIES.register(
        "coinflip", "hwnas.engine.strategies:random", pipeline="table", description="heads or tails"
    )
    try:
        assert main(["search", "--help"]) == 0
    finally:
        STRATEGIES.unregister("coinflip")
    text = "".join(capsys.readouterr().out.split())  # click wraps lines (also at hyphens)
    assert "coinflip:headsortails" in text
    for name in STRATEGIES.names():
        description = "".join(STRATEGIES.info(name)["description"].split())
        assert f"{name}:{description}" in text, name
    assert "Default:frontier" in text and "elsensga3" in text
