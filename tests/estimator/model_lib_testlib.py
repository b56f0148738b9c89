"""The small SSD pipeline config that the model_lib and both-paths tests train and evaluate."""

import os

from core import config_util

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SSD_CONFIG = os.path.join(_REPO_ROOT, 'configs', 'ssd_shapes.config')


def small_config(data, num_steps=3, batch_size=2):
  """configs/ssd_shapes.config pointed at `data`, depth multiplier 0.25, eval batch 1.

  Args:
    data: the dict of `tools.create_shapes_tf_record.create_shapes_dataset`.
    num_steps: `train_config.num_steps`.
    batch_size: `train_config.batch_size`.

  Returns:
    The `TrainEvalPipelineConfig`, for the caller to change further.
  """
  pipeline = config_util.load_pipeline_config(SSD_CONFIG)
  config_util.apply_overrides(pipeline, overrides={
      'train_config.batch_size': batch_size,
      'train_config.num_steps': num_steps,
      'train_input_reader.tf_record_input_reader.input_path': [data['train_pattern']],
      'train_input_reader.label_map_path': data['label_map_path'],
      'train_input_reader.num_readers': 1,
      'eval_config.batch_size': 1,
  })
  del pipeline.eval_input_reader[1:]
  eval_input = pipeline.eval_input_reader[0]
  del eval_input.tf_record_input_reader.input_path[:]
  eval_input.tf_record_input_reader.input_path.append(data['val_pattern'])
  eval_input.label_map_path = data['label_map_path']
  pipeline.model.ssd.feature_extractor.depth_multiplier = 0.25
  return pipeline


def write_small_config(directory, data, num_steps=3):
  """`small_config` at batch 2, saved in `directory`; returns its path."""
  return config_util.save_pipeline_config(small_config(data, num_steps), directory)
