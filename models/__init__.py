"""Reference models built by `builders.model_builder`; none reads a proto.

Start with `ssd_meta_arch.py` (a `core.model.DetectionModel`) or
`slim_classifier.py` (a `core.model.ClassificationModel`).

Map:

* `ssd_meta_arch.py`: the single-shot detector and `SSDFeatureExtractor`, the
  base class of its feature extractors; `box_predictor.py` its per-anchor
  heads (convolutional and weight-shared, as the OD API's).
* The zoo's SSD feature extractors, with the zoo checkpoints' variable names
  (builders/feature_extractor_registry.py maps each `type` to its class):
  `ssd_mobilenet_v1_feature_extractors.py` (plain, embedded, FPN, PPN),
  `ssd_mobilenet_v2_v3_feature_extractors.py` (v2, v2 FPN, v3, EdgeTPU),
  `ssd_mobiledet_feature_extractors.py`, `ssd_mnasfpn_feature_extractor.py`,
  `ssd_inception_feature_extractors.py`, `ssd_resnet_fpn_feature_extractors.py`;
  `feature_map_generators.py` their extra layers and FPNs.
* Base networks tf_slim.nets lacks, with their classification checkpoints'
  names: `mobilenet_v1.py`, `mobilenet_v2_v3.py` (on `mobilenet_blocks.py`),
  `mobiledet.py`.
* `ssd_feature_extractors.py`: slimtrain's small CPU-demo extractors over
  `backbones.py`, the small convolutional backbones.
* `slim_classifier.py`: an image classifier over `tf_slim.nets`.
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
