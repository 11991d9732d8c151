"""``python -m stillframe ...`` is the ``stillframe`` command."""

import sys

from stillframe.cli import main

if __name__ == "__main__":
    sys.exit(main())
