"""Warm starting: only selected variables present with a matching shape are restored."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import test_util
from tests.estimator import mnist_testlib as mnist
from trainer import estimator as tfe
from estimator import warm_starting

tf.compat.v1.disable_eager_execution()


def _estimator(model_dir, params=None, warm_start_from=None):
  config = tfe.RunConfig(save_checkpoints_steps=10, tf_random_seed=3,
                         session_config=test_util.session_config(1))
  return tfe.Estimator(mnist.model_fn, model_dir=str(model_dir), config=config,
                       params=params or {}, warm_start_from=warm_start_from)


@pytest.fixture(scope='module')
def source(tmp_path_factory):
  """A momentum-trained model with 16 hidden units (has optimizer slots)."""
  model_dir = tmp_path_factory.mktemp('source')
  est = _estimator(model_dir, params={'optimizer': 'momentum'})
  est.train(mnist.train_input_fn(), max_steps=10)
  return est


def _values_after_one_step(model_dir, params, ws, learning_rate=0.0):
  """Trains one step with learning rate 0 so the values are the initial ones."""
  params = dict(params, learning_rate=learning_rate)
  est = _estimator(model_dir, params=params, warm_start_from=ws)
  est.train(mnist.train_input_fn(), steps=1)
  return est


def _initial_values(params, settings):
  """Variable values of a fresh TRAIN graph of the model after warm starting."""
  with tf.Graph().as_default():
    tf.compat.v1.train.create_global_step()
    images, labels = mnist.make_data(4)
    mnist.model_fn({'images': tf.constant(images)}, tf.constant(labels), tfe.ModeKeys.TRAIN,
                   params)
    warm_starting.warm_start(settings)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return {v.op.name: sess.run(v) for v in tf.compat.v1.global_variables()}


def test_regex_string_restores_trainable_variables_only(source):
  values = _initial_values({'optimizer': 'momentum'}, tfe.WarmStartSettings(source.model_dir))
  for name in ('hidden/weights', 'hidden/biases', 'logits/weights', 'logits/biases'):
    np.testing.assert_allclose(values[name], source.get_variable_value(name))
  # Momentum slots and the global step are not trainable: they start fresh.
  assert not np.any(values['hidden/weights/Momentum'])
  assert values['global_step'] == 0


def test_list_of_regexes_covers_global_variables(source):
  settings = tfe.WarmStartSettings(source.model_dir, vars_to_warm_start=['hidden/.*'])
  values = _initial_values({'optimizer': 'momentum'}, settings)
  for name in ('hidden/weights', 'hidden/weights/Momentum', 'hidden/biases/Momentum'):
    np.testing.assert_allclose(values[name], source.get_variable_value(name))
  assert not np.allclose(values['logits/weights'], source.get_variable_value('logits/weights'))
  assert not np.any(values['logits/weights/Momentum'])


def test_mismatched_shapes_are_skipped(source, tmp_path):
  # 32 hidden units: hidden/* and logits/weights change shape; logits/biases does not.
  ws = tfe.WarmStartSettings(source.model_dir)
  est = _values_after_one_step(tmp_path, {'hidden_units': 32}, ws)
  assert est.get_variable_value('hidden/weights').shape == (64, 32)
  np.testing.assert_allclose(est.get_variable_value('logits/biases'),
                             source.get_variable_value('logits/biases'))


def test_prev_var_name_and_warm_start_function(source):
  with tf.Graph().as_default():
    new = tf.compat.v1.get_variable('renamed_biases', [10], initializer=tf.zeros_initializer())
    other = tf.compat.v1.get_variable('not_in_ckpt', [3], initializer=tf.ones_initializer())
    settings = tfe.WarmStartSettings(
        source.latest_checkpoint(), vars_to_warm_start='.*',
        var_name_to_prev_var_name={'renamed_biases': 'logits/biases'})
    assert warm_starting.warm_start(settings) == ['renamed_biases']
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      np.testing.assert_allclose(sess.run(new), source.get_variable_value('logits/biases'))
      np.testing.assert_allclose(sess.run(other), np.ones(3))


def test_warm_start_only_without_checkpoint(source, tmp_path):
  est = _estimator(tmp_path, params={'learning_rate': 0.5})
  est.train(mnist.train_input_fn(), max_steps=3)
  trained = est.get_variable_value('hidden/weights')
  # Restarting with warm start must not overwrite the model_dir's own checkpoint.
  est = _estimator(tmp_path, params={'learning_rate': 0.0},
                   warm_start_from=source.model_dir)
  est.train(mnist.train_input_fn(), max_steps=4)
  np.testing.assert_allclose(est.get_variable_value('hidden/weights'), trained)


def test_settings_validation_and_conversion(tmp_path):
  with pytest.raises(ValueError, match='`ckpt_to_initialize_from` MUST be set in '
                     'WarmStartSettings'):
    tfe.WarmStartSettings('')
  settings = tfe.WarmStartSettings('/ckpt')
  assert settings.vars_to_warm_start == '.*'
  assert settings.var_name_to_vocab_info == {} and settings.var_name_to_prev_var_name == {}
  assert warm_starting.get_warm_start_settings('/ckpt') == settings
  saved_model = tmp_path / 'sm'
  (saved_model / 'variables').mkdir(parents=True)
  (saved_model / 'variables' / 'variables.index').write_bytes(b'')
  converted = warm_starting.get_warm_start_settings(str(saved_model))
  assert converted.ckpt_to_initialize_from == str(saved_model / 'variables' / 'variables')
  with pytest.raises(ValueError, match='warm_start_from must be a string or a '
                     'WarmStartSettings, instead got'):
    tfe.Estimator(mnist.model_fn, model_dir=str(tmp_path), warm_start_from=3)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
