"""`python -m llm_worker.cli`: the `llm-worker` command."""

import sys

from llm_worker.cli import main

sys.exit(main())
