"""A run published in its study: the study's artifacts are the run folder's files, no more."""

from __future__ import annotations

import optuna

from hwnas.cli import main
from hwnas.engine.publish import run_files


def _artifacts(storage: str, study: str) -> dict[str, dict[str, str]]:
    s = optuna.load_study(study_name=study, storage=storage)
    metas = optuna.artifacts.get_all_artifact_meta(s)  # raised TypeError on a dropped record
    assert len(metas) == len(s.user_attrs["artifacts"])
    return s.user_attrs["artifacts"]


def test_a_rerun_keeps_only_the_run_folders_files_as_artifacts(hwnas_home, tmp_path):
    """A rerun whose front changed left the earlier front's zoo entries downloadable from the
    dashboard (57 artifacts for a 42-file run folder), and a rerun into another artifact
    folder kept records of files that folder does not have. Now the study's artifacts are
    exactly the run folder's files, in the folder the dashboard serves."""
    storage = f"sqlite:///{tmp_path / 's.db'}"
    run = tmp_path / "run"
    args = ["search", "--device", "pixel3", "--seed", "2", "--storage", storage,
            "--study", "p", "--out", str(run)]  # fmt: skip
    assert main([*args, "--budget", "3", "--artifact-dir", str(tmp_path / "a")]) == 0
    first = set(_artifacts(storage, "p"))
    assert main([*args, "--budget", "12", "--artifact-dir", str(tmp_path / "a")]) == 0
    known = _artifacts(storage, "p")
    assert set(known) == set(run_files(run)) and first - set(known)  # the front changed
    stored = {p.name for p in (tmp_path / "a").iterdir() if not p.name.startswith(".")}
    assert {v["id"] for v in known.values()} == stored
    assert main([*args, "--budget", "12", "--artifact-dir", str(tmp_path / "b")]) == 0
    known = _artifacts(storage, "p")
    assert set(known) == set(run_files(run))
    assert all((tmp_path / "b" / v["id"]).is_file() for v in known.values())
    # a file deleted from the artifact folder behind hwnas's back (optuna-dashboard deletes
    # the file before it checks the study in the URL) is uploaded again by the next rerun; it
    # was kept as recorded, its download failing for ever
    gone = known["pareto.csv"]["id"]
    (tmp_path / "b" / gone).unlink()
    assert main([*args, "--budget", "12", "--artifact-dir", str(tmp_path / "b")]) == 0
    known = _artifacts(storage, "p")
    assert set(known) == set(run_files(run)) and known["pareto.csv"]["id"] != gone
    assert all((tmp_path / "b" / v["id"]).is_file() for v in known.values())
