#!/usr/bin/env bash
# Set up a fresh machine and run every test (fast, slow and browser ones).
# Used by .ci/run; run it from the repository root: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install -q torch==2.13.0
python -m pip install -q -e ".[dev]"
bash scripts/install_browser_deps.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
# Lint and type checks: the hooks of .pre-commit-config.yaml (ruff check; mypy on rudder/,
# settings in pyproject.toml). pre-commit needs a git checkout; elsewhere the same commands.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    python -m pre_commit run --all-files --show-diff-on-failure
else
    python -m ruff check .
    python -m mypy
fi
# Every test, the slow and browser ones included (plain `pytest` runs only the fast ones).
# pytest's exit code 5 (nothing collected) fails the script like any other failure.
python -m pytest -q -p no:cacheprovider -o addopts="-ra --import-mode=importlib" "$@"
