"""``python -m hwnas`` runs the CLI."""

import sys

from hwnas.cli import main

sys.exit(main())
