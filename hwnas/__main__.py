"""``python -m hwnas`` runs the CLI (:mod:`hwnas.entry`)."""

import sys

from hwnas.entry import main

sys.exit(main())
