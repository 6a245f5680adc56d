# A job that needs its environment: quickstart_model is installed only in the quickstart
# environment (from ../wheels), and `python` is the environment's because the engine puts
# its bin directory first on PATH.
import os
import sys

import quickstart_model

print(f"rank {os.environ.get('RANK')}: evaluating with {quickstart_model.describe()} (python {sys.executable})")
