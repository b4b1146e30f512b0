"""``python -m knowledge``: the command line, :mod:`knowledge.cli`."""

import sys

from knowledge.cli import main

if __name__ == "__main__":
    sys.exit(main())
