"""Root pytest set-up: the maintainer tools (tools/) are importable, and the course's plugin is loaded.

tools/pytest_course.py holds the per-notebook time budgets, the check of what a learner sees in a cell, and the
error-index check; tools/nblint.py the notebook rules.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools"))

pytest_plugins = ["pytest_course"]
