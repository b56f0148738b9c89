"""The OD API's 2018 legacy/train.py and legacy/eval.py, as programs of that shape run them.

That generation fed the legacy trainer and evaluator from
`dataset_builder.make_initializable_iterator(dataset_builder.build(config)).get_next()`
and passed `graph_rewriter_builder.build(...)` as `graph_hook_fn` when the
pipeline had a `graph_rewriter`. Here the same calls, with imports changed
only, train the shapes SSD for a few steps and evaluate its checkpoint once.
"""

import functools
import os
import sys

import pytest
import tensorflow as tf

from builders import dataset_builder
from builders import graph_rewriter_builder
from builders import model_builder
from core import config_util
from core import label_map_util
from tests.export import train_util
from tools import create_shapes_tf_record
from trainer import evaluator
from trainer import trainer

tf.compat.v1.disable_eager_execution()

NUM_STEPS = 3


def _get_next(config):
  """What 2018's legacy/train.py and eval.py handed the trainer and evaluator."""
  return dataset_builder.make_initializable_iterator(dataset_builder.build(config)).get_next()


def _graph_rewriter_fn(configs, is_training):
  if 'graph_rewriter_config' not in configs:
    return None
  return graph_rewriter_builder.build(configs['graph_rewriter_config'], is_training=is_training)


def _train_2018(configs, train_dir):
  """legacy/train.py's main for a single task, its calls kept."""
  model_fn = functools.partial(model_builder.build, model_config=configs['model'],
                               is_training=True)
  create_input_dict_fn = functools.partial(_get_next, configs['train_input_config'])
  trainer.train(create_input_dict_fn, model_fn, configs['train_config'], '', 0, 1, 1, True,
                0, 'worker', True, train_dir,
                graph_hook_fn=_graph_rewriter_fn(configs, is_training=True))


def _eval_2018(configs, checkpoint_dir, eval_dir):
  """legacy/eval.py's main with --run_once, its calls kept."""
  model_fn = functools.partial(model_builder.build, model_config=configs['model'],
                               is_training=False)
  input_config = configs['eval_input_config']
  create_input_dict_fn = functools.partial(_get_next, input_config)
  categories = label_map_util.create_categories_from_labelmap(input_config.label_map_path)
  eval_config = configs['eval_config']
  eval_config.max_evals = 1
  return evaluator.evaluate(create_input_dict_fn, model_fn, eval_config, categories,
                            checkpoint_dir, eval_dir,
                            graph_hook_fn=_graph_rewriter_fn(configs, is_training=False))


def test_train_then_eval_the_2018_way(tmp_path):
  data = create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path / 'data'), num_train=8, num_val=4, height=64, width=64)
  configs = train_util.ssd_configs(data, num_steps=NUM_STEPS, batch_size=2)
  configs['eval_config'].num_examples = 4
  train_dir, eval_dir = str(tmp_path / 'train'), str(tmp_path / 'eval')

  _train_2018(configs, train_dir)
  checkpoint = tf.train.latest_checkpoint(train_dir)
  assert checkpoint is not None and checkpoint.endswith('model.ckpt-%d' % NUM_STEPS)

  metrics = _eval_2018(configs, train_dir, eval_dir)
  assert 'DetectionBoxes_Precision/mAP' in metrics, metrics
  assert 0.0 <= metrics['DetectionBoxes_Precision/mAP'] <= 1.0
  assert any(name.startswith('events.out.tfevents') for name in os.listdir(eval_dir))


def test_a_quantized_pipeline_is_refused_before_training(tmp_path):
  data = create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path / 'data'), num_train=4, num_val=2, height=64, width=64)
  configs = train_util.ssd_configs(data, num_steps=1, batch_size=2)
  pipeline = train_util.pipeline_config(configs)
  pipeline.graph_rewriter.quantization.delay = 100
  configs = config_util.create_configs_from_pipeline_proto(pipeline)
  with pytest.raises(ValueError, match='graph_rewriter.quantization'):
    _train_2018(configs, str(tmp_path / 'train'))
  assert not os.path.exists(os.path.join(str(tmp_path / 'train'), 'checkpoint'))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
