"""experiments: suites of rudder TrainConfig YAMLs that reproduce the papers' tables, a
resumable runner (``python -m experiments.run``), result tables and plots. See README.md."""
