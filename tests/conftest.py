"""pytest configuration shared by the whole suite.

Test modules are graph-mode TF (each calls
`tf.compat.v1.disable_eager_execution()` itself so that it also runs alone
under bazel); anything that must run eagerly runs in a subprocess.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import core  # noqa: E402,F401  (activates core.compat before any test imports tf_slim)
