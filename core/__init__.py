"""Core of slimtrain: the pieces every workflow shares.

Start with `model.py` (the interfaces a model implements) and
`standard_fields.py` (the tensor names that flow between the pieces).

Map:

* TensorFlow/tf-slim adaptation: `compat.py` (the only module that patches
  either; imported first by every package), `COMPAT.md` (why each fix exists).
* Logging: `logs.py` (every slimtrain module logs through it, on TensorFlow's
  'tensorflow' logger; no handler is ever added or removed).
* Models' contract: `model.py` (`DetectionModel`, `ClassificationModel`),
  `standard_fields.py` (field names, `LABEL_ID_OFFSET`), `model_generations.py`
  (driving a 2017 DetectionModel, without `true_image_shapes`, with the same calls).
* Input: `data_decoders.py` (tf.Example -> tensor_dict), `batcher.py`
  (`BatchQueue`), `prefetcher.py`, `label_map_util.py`.
* Augmentation: `preprocessor.py` (the entry point and the simple steps),
  `preprocessor_crop.py`, `preprocessor_resize.py`, `preprocessor_ssd.py`,
  `preprocessor_keypoints.py`, `preprocessor_cache.py`.
* Detector building blocks: `anchor_generator.py`, `box_coder.py`,
  `box_list_ops.py`, `matcher.py`, `target_assigner.py`, `losses.py`,
  `hard_example_miner.py`, `post_processing.py`.
* Checkpoints and variables: `checkpoints.py` (path resolution, step,
  following a training directory), `variables_helper.py` (choosing variables
  and gradients, checkpoint names), `fine_tune.py` (restore maps, the
  fine-tune `init_fn` of a TrainConfig), `moving_averages.py` (the averaging
  optimizer, and the one Saver that reads raw weights or their averages back).
* The training step both paths share (legacy loop and Estimator model_fn):
  `gradient_surgery.py` (the TrainConfig's multiply / freeze / filter / clip
  of the gradients), `numerics.py` (the gradient-norm check, the NaN-loss
  injector).
* Paths: `paths.py` (every user path goes through it and tf.io.gfile, so
  `gs://` and other TF filesystems work; atomic file writes).
* Configs, metrics, exports: `config_util.py` (pipeline config files),
  `coco_evaluation.py` (COCO box metrics), `saved_model_writer.py` (the one
  atomic export writer).
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
