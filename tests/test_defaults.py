"""One source of defaults (issue 23): every default that README.md, docs/ and ``hwnas search
--help`` state equals the code's, which lives in the settings types (``SearchSettings``,
``SupernetSettings``) and the registries they name. A fact edited on one side only fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwnas.cli.options import default_of
from hwnas.cli.search import search_cmd
from hwnas.engine.loop import DEFAULT_SPACE, SearchSettings
from hwnas.engine.strategies import DEFAULT, FALLBACK, STRATEGIES
from hwnas.jobs.supernet import SupernetSettings
from hwnas.paths import default_storage_url, default_store_path

REPO = Path(__file__).resolve().parents[1]
TABLE = {n: default_of(SearchSettings, n) for n in ("dataset", "objective", "budget", "seed")}
SUPERNET = {
    n: default_of(SupernetSettings, n) for n in ("data", "epochs", "batch_size", "finetune_epochs")
}


def _norm(text: str) -> str:
    """Names compared without case and punctuation (NAS-Bench-201 is nasbench201)."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _help() -> str:
    """``hwnas search --help`` with every option on one line."""
    r = CliRunner().invoke(search_cmd, ["--help"], terminal_width=10_000, max_content_width=10_000)
    assert r.exit_code == 0, r.output
    return r.output


# (file, pattern, what each group must equal: the code's value); every pattern must match
DOC_FACTS = [
    ("README.md", r"default strategy `(\w+)`", (DEFAULT,)),
    ("README.md", r"`(\w+)` \(default\)", (DEFAULT,)),
    ("README.md", r"over ([\w-]+) against", (DEFAULT_SPACE,)),
    ("README.md", r"(\d+) accuracy queries", (TABLE["budget"],)),
    ("README.md", r"accuracy queries, ([\w-]+) accuracy", (TABLE["dataset"],)),
    ("docs/usage.md", r"\(default: (\w+), below\)", (DEFAULT,)),
    ("docs/usage.md", r"`hwnas search` options: `--space (\w+)`", (DEFAULT_SPACE,)),
    ("docs/usage.md", r"`(\w+)` \(the default wherever", (DEFAULT,)),
    ("docs/usage.md", r"`(\w+)` \(the default where costs cannot", (FALLBACK,)),
    ("docs/architecture.md", r"default (\w+) where costs are known up front, else (\w+)",
     (DEFAULT, FALLBACK)),
    ("docs/architecture.md", r"`DEFAULT` \(`(\w+)`\)", (DEFAULT,)),
    ("docs/architecture.md", r"`FALLBACK` \(`(\w+)`\)", (FALLBACK,)),
    ("docs/supernets.md", r"command-line defaults on (\w+) \((\d+) epochs\)",
     (SUPERNET["data"], SUPERNET["epochs"])),
]  # fmt: skip

HELP_FACTS = [
    (r"--space TEXT .*Default: (\w+) ", (DEFAULT_SPACE,)),
    (r"--dataset TEXT .*; default (\w+)\)", (TABLE["dataset"],)),
    (r"--objective \S+ .*\[default: (\w+)\]", (TABLE["objective"],)),
    (r"--budget INTEGER .*\[default: (\d+)\]", (TABLE["budget"],)),
    (r"--seed INTEGER RANGE .*\[default: (\d+);", (TABLE["seed"],)),
    (r"--strategy TEXT .*Default: (\w+) wherever .*, else (\w+)\.", (DEFAULT, FALLBACK)),
    (r"--storage URL .*Default: (\S+) in the hwnas home", (Path(default_storage_url()).name,)),
    (r"--store PATH\|URL .*Default: (\S+) in the hwnas home", (default_store_path().name,)),
    (r"--data TEXT .*'(\w+)' \(scikit-learn's bundled digits; the default\)", (SUPERNET["data"],)),
    (r"--epochs INTEGER .*\[default: (\d+)\]", (SUPERNET["epochs"],)),
    (r"--batch-size INTEGER .*\[default: (\d+)\]", (SUPERNET["batch_size"],)),
    (r"--finetune-epochs INTEGER .*\[default: (\d+)\]", (SUPERNET["finetune_epochs"],)),
]


def _check(text: str, pattern: str, want: tuple, where: str) -> None:
    found = re.findall(pattern, text)
    assert found, f"{where}: no match for {pattern!r} (the fact moved: update this test)"
    for groups in found:
        groups = (groups,) if isinstance(groups, str) else groups
        assert [_norm(g) for g in groups] == [_norm(str(w)) for w in want], (where, pattern)


@pytest.mark.parametrize(("path", "pattern", "want"), DOC_FACTS)
def test_a_default_the_docs_state_is_the_codes(path, pattern, want):
    _check((REPO / path).read_text(), pattern, want, path)


def test_every_default_search_help_states_is_the_codes():
    text = _help()
    for pattern, want in HELP_FACTS:
        _check(text, pattern, want, "hwnas search --help")


def test_the_default_strategies_exist_and_a_python_caller_gets_the_clis_defaults():
    assert STRATEGIES.info(DEFAULT)["pipeline"] == STRATEGIES.info(FALLBACK)["pipeline"] == "table"
    s = SearchSettings(space=DEFAULT_SPACE, device="pixel3")
    assert (s.strategy, s.dataset, s.objective, s.budget, s.seed) == (
        DEFAULT, TABLE["dataset"], TABLE["objective"], TABLE["budget"], TABLE["seed"],
    )  # fmt: skip
    # the CLI's options are the settings types' defaults
    params = {p.name: p.default for p in search_cmd.params}
    assert {k: params[k] for k in ("objective", "budget", "seed")} == {
        k: TABLE[k] for k in ("objective", "budget", "seed")
    }
    assert {k: params[k] for k in SUPERNET} == SUPERNET


def test_a_presets_per_strategy_values_are_in_the_help_and_the_docs():
    """``--help`` said "preset=small-data sets ... arch_lr=0.003 ..." while singlepath's
    small-data arch_lr is 0.01 (summary.json); fbnet's tau_min 0.2 and proxyless's arch_every
    1 were said nowhere. Each strategy's own preset value is in both, from the table the code
    reads, and is the value a search resolves."""
    from hwnas.supernet.settings import PRESETS, resolve_strategy_options

    help_text = " ".join(_help().split())
    docs = " ".join((REPO / "docs/supernets.md").read_text().split())
    own = [(st, k, v) for st, vals in PRESETS["small-data"].items() if st != "*"
           for k, v in vals.items()]  # fmt: skip
    assert {(st, k) for st, k, _ in own} >= {("singlepath", "arch_lr"), ("fbnet", "tau_min"),
                                             ("proxyless", "arch_every")}  # fmt: skip
    for strategy, key, value in own:
        said = f"{strategy} {key}={value:g}"
        assert said in help_text and f"`{said}`" in docs, said
        resolved = resolve_strategy_options(strategy, {"preset": "small-data"})
        assert getattr(resolved, key) == value
    assert "then per strategy, over those: fbnet tau_min=0.2" in help_text
