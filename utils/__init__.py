"""The Object Detection API's `object_detection.utils` names that user code imports.

`from object_detection.utils import ops as util_ops` ports as `from utils import ops as
util_ops`, and `from object_detection.utils import variables_helper` as `from utils import
variables_helper` (the same functions as `core.variables_helper`); and
`learning_schedules.py` holds the learning-rate schedules (tensors of the global step)
that `builders/optimizer_builder.py` builds from a config, as the OD API keeps them in
`utils/`. Only these modules live here; `config_util` and `label_map_util` are
`core.config_util` and `core.label_map_util` (see docs/migrating.md).
"""

from core import compat  # noqa: F401  (first, as in every package: adapts tf_slim to TF 2.21)
