"""`python -m purejaxppo.cli ...`: the same as the `purejaxppo` command."""

import sys

from purejaxppo.cli.main import main

sys.exit(main())
