import sys

from modelscale.cli import main

sys.exit(main())
