"""`hwnas train`'s closing lines say what each entry scored, and flag one that learnt nothing."""

from __future__ import annotations

import json

from helpers import hwnas_main

NO_PATH = "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"  # the output ignores the input


def test_a_chance_level_entry_is_flagged_on_its_summary_line(tmp_path):
    entry = tmp_path / "entry"
    r = hwnas_main("train", NO_PATH, "--data", "digits", "--epochs", "1", "--batch-size", "32",
                   "--limit", "100", "--out", str(entry))  # fmt: skip
    assert r.returncode == 0, r.stderr
    card = json.loads((entry / "card.json").read_text())
    assert card["chance_level"]["value"]
    line = next(s for s in r.stdout.splitlines() if s.startswith(f"{entry}:"))
    assert "CHANCE-LEVEL (chance 10%)" in line and "do not ship it" in line
