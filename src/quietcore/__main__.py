import sys

from quietcore.cli import main

sys.exit(main())
