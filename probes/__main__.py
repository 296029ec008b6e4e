import sys

from probes.cli import main

sys.exit(main())
