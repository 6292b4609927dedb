"""python -m flextensor run [options] -- command: flextensor-run itself."""
import os
import shutil
import sys


def find_run():
    """The flextensor-run of this package's build or installation."""
    try:
        from . import _paths
        if os.access(_paths.FLEXTENSOR_RUN, os.X_OK):
            return _paths.FLEXTENSOR_RUN
    except ImportError:
        pass
    return shutil.which("flextensor-run")


def main(argv):
    run = find_run()
    if not run:
        sys.stderr.write("python -m flextensor run: flextensor-run not found (neither "
                         "beside this package's build or installation nor on PATH): "
                         "install FlexTensor with `meson install`\n")
        return 2
    os.execv(run, [run] + list(argv))
    return 2
