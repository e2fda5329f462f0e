"""``python -m scanbench.cli``: the same as the ``scanbench`` command.

``python -m`` puts the current directory first on ``sys.path``; the ``scanbench`` command
does not (`scanbench.cli.main`), and neither does this: the directory is dropped before
the command line imports its libraries, so a module planted there does not run.
"""

import os
import sys

if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from .main import main  # after the current directory is off the path

sys.exit(main())
