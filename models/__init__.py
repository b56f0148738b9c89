"""Reference models built by `builders.model_builder`; none reads a proto.

Start with `ssd_meta_arch.py` (a `core.model.DetectionModel`) or
`slim_classifier.py` (a `core.model.ClassificationModel`).

Map:

* `ssd_meta_arch.py`: the single-shot detector; `ssd_feature_extractors.py`
  its multi-scale feature maps; `box_predictor.py` its per-anchor heads.
* `slim_classifier.py`: an image classifier over `tf_slim.nets`.
* `backbones.py`: the small convolutional backbones both can use.
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
