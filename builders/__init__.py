"""Builders: the only code that reads config protos and turns them into objects.

One `build(config)` per message, as in the Object Detection API; each checks
the type of its message first. Start with `model_builder.py` and
`input_reader_builder.py`, the two the trainer calls first.

Map:

* `model_builder.py`: `DetectionModel` -> an SSD or a slim classifier, with
  a small builder per sub-message (anchors, box coder, matcher, losses, ...).
* `input_reader_builder.py`: `InputReader` -> per-example tensor_dicts or a
  batched tf.data pipeline; `decoder_builder.py`: its tf.Example decoder;
  `dataset_builder.py`: the 2018 OD API's names over the same pipeline.
* `graph_rewriter_builder.py`: `GraphRewriter` (quantization) -> refused by name.
* `preprocessor_builder.py`: `PreprocessingStep` -> an augmentation function
  and its arguments.
* `optimizer_builder.py`: `Optimizer` -> optimizer and learning rate
  (`build_for_training` for a whole `TrainConfig`), over the schedules of
  `utils/learning_schedules.py`; `learning_schedules.py` here is that
  module's old import path.
* `deploy_config_builder.py`: `DeployConfig` -> clones and deployment options.
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
