"""``python -m scanbench.cli``: the same as the ``scanbench`` command."""

import sys

from .main import main

sys.exit(main())
