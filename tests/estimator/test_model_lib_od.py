"""OD API model_lib calls with imports changed: `create_estimator_and_inputs` with its whole
signature (as `model_main.py` and `model_tpu_main.py` call it, keyword overrides included)
and `unstack_batch`."""

import inspect
import logging
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from core import config_util
from core import logs
from tests.estimator import model_lib_testlib
from tools import create_shapes_tf_record
from trainer import estimator as tfe
from trainer import model_lib

tf.compat.v1.disable_eager_execution()

# The OD API's (TF1 model_lib.py) parameters, in order, with their defaults; `...` marks
# a parameter without a default there.
OD_SIGNATURE = [
    ('run_config', ...), ('hparams', ...), ('pipeline_config_path', ...),
    ('config_override', None), ('train_steps', None), ('sample_1_of_n_eval_examples', None),
    ('sample_1_of_n_eval_on_train_examples', 1),
    ('model_fn_creator', model_lib.create_model_fn), ('use_tpu_estimator', False),
    ('use_tpu', False), ('num_shards', 1), ('params', None),
    ('override_eval_num_epochs', True), ('save_final_config', False),
    ('postprocess_on_cpu', False), ('export_to_tpu', None),
]


@pytest.fixture(scope='module')
def config_path(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp('model_lib_od'))
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(directory, 'data'), num_train=8, num_val=3, height=64, width=64)
  return model_lib_testlib.write_small_config(directory, data)


def test_signature_is_the_od_apis():
  parameters = list(inspect.signature(model_lib.create_estimator_and_inputs).parameters
                    .values())
  assert [p.name for p in parameters[:len(OD_SIGNATURE)]] == [n for n, _ in OD_SIGNATURE]
  for parameter, (name, default) in zip(parameters, OD_SIGNATURE):
    if default is not ...:
      assert parameter.default == default, name
  assert parameters[-1].kind == parameters[-1].VAR_KEYWORD


class _Records(logging.Handler):
  def __init__(self):
    super().__init__()
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


def test_model_tpu_main_call_trains_here_with_its_overrides(config_path, tmp_path):
  # object_detection/model_tpu_main.py, imports changed.
  kwargs = {}
  kwargs['batch_size'] = 4
  config = tfe.RunConfig(model_dir=str(tmp_path / 'model'))
  records = _Records()
  model_lib._TPU_ARGUMENTS_LOGGED.clear()  # pylint: disable=protected-access
  logs.logger().addHandler(records)
  try:
    for _ in range(2):  # the TPU arguments are logged once, not per call
      train_and_eval_dict = model_lib.create_estimator_and_inputs(
          run_config=config,
          hparams=model_lib.create_hparams(None),
          pipeline_config_path=config_path,
          train_steps=2,
          sample_1_of_n_eval_examples=1,
          use_tpu_estimator=True,
          use_tpu=True,
          num_shards=8,
          save_final_config=True,
          **kwargs)
  finally:
    logs.logger().removeHandler(records)
  estimator = train_and_eval_dict['estimator']
  train_input_fn = train_and_eval_dict['train_input_fn']
  assert isinstance(estimator, tfe.Estimator)
  assert train_and_eval_dict['train_steps'] == 2
  for name in ('use_tpu_estimator', 'use_tpu', 'num_shards'):
    assert sum(m.startswith(name + '=') for m in records.messages) == 1, records.messages
  saved = config_util.load_pipeline_config(os.path.join(str(tmp_path / 'model'),
                                                        'pipeline.config'))
  assert saved.train_config.batch_size == 4
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        train_input_fn()).get_next()
    assert features['image'].shape[0] == 4
    # model_lib.unstack_batch on the input_fn's own labels.
    unbatched = model_lib.unstack_batch(labels, unpad_groundtruth_tensors=True)
    assert len(unbatched['groundtruth_boxes']) == 4
    with tf.compat.v1.Session() as session:
      boxes, counts = session.run([unbatched['groundtruth_boxes'],
                                   labels['num_groundtruth_boxes']])
  assert [len(b) for b in boxes] == list(counts)


def test_positional_call_in_the_od_order(config_path, tmp_path):
  result = model_lib.create_estimator_and_inputs(
      tfe.RunConfig(model_dir=str(tmp_path)), model_lib.create_hparams(), config_path,
      None, 5, 2, 1, model_lib.create_model_fn, False, False, 1, None, True, False, False,
      None)
  assert result['train_steps'] == 5
  assert set(result) == {'estimator', 'train_input_fn', 'eval_input_fns', 'eval_input_names',
                         'eval_on_train_input_fn', 'predict_input_fn', 'train_steps'}


def test_a_model_fn_creator_is_called_with_the_od_arguments(config_path, tmp_path):
  calls = []

  def model_fn_creator(detection_model_fn, configs, hparams, use_tpu=False,
                       postprocess_on_cpu=False):
    calls.append((use_tpu, postprocess_on_cpu))
    return model_lib.create_model_fn(detection_model_fn, configs, hparams)

  model_lib.create_estimator_and_inputs(
      tfe.RunConfig(model_dir=str(tmp_path)), model_lib.create_hparams(), config_path,
      model_fn_creator=model_fn_creator, postprocess_on_cpu=True)
  assert calls == [(False, True)]


def test_keyword_overrides_and_unknown_ones(config_path, tmp_path):
  result = model_lib.create_estimator_and_inputs(
      tfe.RunConfig(model_dir=str(tmp_path)), model_lib.create_hparams(), config_path,
      save_final_config=True, train_shuffle=False, learning_rate=0.5,
      **{'train_config.num_steps': 9})
  assert result['train_steps'] == 9
  saved = config_util.load_pipeline_config(os.path.join(str(tmp_path), 'pipeline.config'))
  assert not saved.train_input_reader.shuffle
  optimizer = getattr(saved.train_config.optimizer,
                      saved.train_config.optimizer.WhichOneof('optimizer'))
  rate = optimizer.learning_rate
  kind = rate.WhichOneof('learning_rate')
  initial = {'constant_learning_rate': 'learning_rate',
             'exponential_decay_learning_rate': 'initial_learning_rate',
             'manual_step_learning_rate': 'initial_learning_rate',
             'cosine_decay_learning_rate': 'learning_rate_base'}[kind]
  assert getattr(getattr(rate, kind), initial) == pytest.approx(0.5)
  with pytest.raises(ValueError, match="unknown config override keyword 'train_batchsize'"):
    model_lib.create_estimator_and_inputs(
        tfe.RunConfig(model_dir=str(tmp_path)), model_lib.create_hparams(), config_path,
        train_batchsize=3)


def test_unstack_batch_cuts_each_image_to_its_boxes():
  with tf.Graph().as_default():
    labels = {
        'groundtruth_boxes': tf.constant(np.arange(2 * 3 * 4, dtype=np.float32)
                                         .reshape([2, 3, 4])),
        'groundtruth_classes': tf.constant(np.eye(3, dtype=np.float32)[None].repeat(2, 0)),
        'groundtruth_weights': tf.ones([2, 3]),
        'num_groundtruth_boxes': tf.constant([2, 0]),
        'image': tf.zeros([2, 5, 5, 3]),
    }
    unpadded = model_lib.unstack_batch(labels, unpad_groundtruth_tensors=True)
    padded = model_lib.unstack_batch(labels, unpad_groundtruth_tensors=False)
    assert unpadded['groundtruth_boxes'][0].shape.as_list()[1:] == [4]
    with tf.compat.v1.Session() as session:
      unpadded, padded = session.run([unpadded, padded])
  assert [b.shape for b in unpadded['groundtruth_boxes']] == [(2, 4), (0, 4)]
  assert [c.shape for c in unpadded['groundtruth_classes']] == [(2, 3), (0, 3)]
  assert [w.shape for w in unpadded['groundtruth_weights']] == [(2,), (0,)]
  assert [i.shape for i in unpadded['image']] == [(5, 5, 3)] * 2
  assert [b.shape for b in padded['groundtruth_boxes']] == [(3, 4)] * 2
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='`num_groundtruth_boxes` not found in tensor_dict'):
      model_lib.unstack_batch({'groundtruth_boxes': tf.zeros([1, 2, 4])})


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
