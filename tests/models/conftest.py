"""Puts this directory on sys.path so the model-zoo tests can import ``zoo_helpers``."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
