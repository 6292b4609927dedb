"""python -m flextensor run [options] -- command [args...]

Runs command with libflextensor preloaded and configured: the options are
flextensor-run's (`python -m flextensor run --help`), and flextensor-run
itself does the work, so both take the same options and say the same."""
import sys

from .run import main

USAGE = ("usage: python -m flextensor run [options] -- command [args...]\n"
         "       python -m flextensor run --help\n")

if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "run":
        sys.stderr.write(USAGE)
        sys.exit(2 if args and args[0] not in ("-h", "--help") else 0)
    sys.exit(main(args[1:]))
