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
