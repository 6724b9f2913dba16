"""Search jobs: a search prepared, run and reported in one place (issue 19)."""
