"""`python -m purejaxppo.cli ...`: the same as the `purejaxppo` command."""

import sys

from purejaxppo.cli.main import main

if __name__ == "__main__":  # importing the module (docs tools do) runs nothing
    sys.exit(main())
