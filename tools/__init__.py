"""Dataset writers: images and annotations in, sharded TFRecords out.

Map:

* `create_shapes_tf_record.py`: the synthetic shapes detection dataset (the
  demo's and the tests' data).
* `create_tf_record.py`: a folder of images with Pascal VOC or COCO
  annotations.
* `dataset_util.py`: what both share (tf.Example features, image codec,
  shard names).
* `strip_k8s_schemas.py` (not a dataset writer): regenerates the Kubernetes
  schema test data in tests/deployment/k8s_schemas/.
* `originality_check.py` (not a dataset writer): reports long stretches of
  our code, docstrings and comments that also appear in reference trees
  (shingled tokens); run by hand on originals already on disk.
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
