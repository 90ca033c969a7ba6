"""`python -m harness.kubelet`: the pod runtime daemon (`harness.cluster up` starts it)."""

import sys

from harness.kubelet.runtime import main

sys.exit(main())
