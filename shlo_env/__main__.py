import sys

from shlo_env.cli import main

sys.exit(main())
