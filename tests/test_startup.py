"""Command lines start without importing torch: ``--help`` and config errors stay instant."""

import subprocess
import sys


def test_train_help_does_not_import_torch():
    code = ("import sys, runpy; sys.argv = ['rudder.train', '--help']\n"
            "try:\n    runpy.run_module('rudder.train', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().endswith("False")


def test_import_rudder_gives_the_public_api_and_loads_nothing_heavy():
    """``rudder`` exports the public API of docs/architecture.md, imported on first use."""
    code = ("import sys, rudder\n"
            "heavy = sorted(m for m in ('torch', 'numpy', 'rudder.losses', 'rudder.models')\n"
            "               if m in sys.modules)\n"
            "from rudder.evaluation import metrics\n"
            "from rudder.text.encoders import load_text_encoder\n"
            "import rudder.losses, rudder.models\n"
            "assert rudder.metrics is metrics and rudder.load_text_encoder is load_text_encoder\n"
            "assert rudder.losses.build and rudder.models.build\n"
            "from rudder.evaluation.loading import load_run\n"
            "from rudder.runs.trained_model import TrainedModel\n"
            "assert rudder.load_run is load_run and rudder.TrainedModel is TrainedModel\n"
            "assert set(rudder.__all__) <= set(dir(rudder))\n"
            "print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_an_unknown_name_of_rudder_is_an_attribute_error():
    import pytest

    import rudder

    with pytest.raises(AttributeError, match="no attribute 'trainer'"):
        rudder.trainer  # noqa: B018 -- the lazy lookup
