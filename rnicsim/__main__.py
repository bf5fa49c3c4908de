"""``python -m rnicsim ...``: the same command line as the ``rnicsim`` script."""
import sys

from rnicsim.cli import main

sys.exit(main())
