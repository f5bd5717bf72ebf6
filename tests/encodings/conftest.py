"""Puts this directory on sys.path so encoding tests can share the reference helpers of
``test_relative_encodings`` (direct-formula checks, the allocation probe)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
