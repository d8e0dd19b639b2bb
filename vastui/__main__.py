"""``python -m vastui`` runs the CLI."""

import sys

from vastui.cli import main

sys.exit(main())
