"""`model_to_estimator` in the programs users write with `tf.keras` (issue 26, items 4-5).

A TF2 user compiles a `tf.keras` model with an optimizer name (`'adam'`,
`'sgd'`, `'rmsprop'`) or object (`tf.keras.optimizers.SGD(learning_rate=1e-4,
momentum=0.9)`) and converts it, in an ordinary eager program or in a graph
program (`tf.compat.v1.disable_eager_execution()`, as docs/migrating.md
says). Each program runs in a fresh interpreter, since eager and graph mode
cannot both be had in one process; it imports slimtrain before touching
`tf.keras`, so `tf.keras` is tf_keras (core/compat.py sets
TF_USE_LEGACY_KERAS=1 when the user has not chosen). Each model trains two
steps from zero weights on one batch, and the kernels must be those the
compiled optimizer gives: its own learning rate and momentum, or the name's
defaults (sgd 0.01; adam and rmsprop 0.001). A program that touches
`tf.keras` before importing slimtrain gets Keras 3, and the TypeError says
how to get tf_keras instead.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPTIMIZERS = ('adam', 'sgd', 'rmsprop', 'SGD(learning_rate=1e-4, momentum=0.9)')
STEPS = 2

# The user's program, with the import of tf.estimator changed to slimtrain's.
USER_PROGRAM = r'''
import json, sys
import numpy as np
import tensorflow as tf
from trainer import estimator as tfe

if sys.argv[1] == 'graph':
  tf.compat.v1.disable_eager_execution()
model_dir, steps = sys.argv[2], int(sys.argv[3])
x = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)


def functional():
  inputs = tf.keras.Input((3,), name='x')
  outputs = tf.keras.layers.Dense(1, kernel_initializer='zeros', name='out')(inputs)
  return tf.keras.Model(inputs, outputs)


def sequential():
  return tf.keras.Sequential([tf.keras.layers.Dense(1, kernel_initializer='zeros',
                                                    input_shape=(3,), name='out')])


kernels = {}
for kind, build in (('functional', functional), ('sequential', sequential)):
  for i, name in enumerate(json.loads(sys.argv[4])):
    model = build()
    if name.startswith('SGD'):
      model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=1e-4, momentum=0.9),
                    loss='mse')
    else:
      model.compile(optimizer=name, loss='mse')
    # was: tf.keras.estimator.model_to_estimator(keras_model=model, model_dir=...)
    est = tfe.keras.model_to_estimator(keras_model=model,
                                       model_dir='%s/%s_%d' % (model_dir, kind, i))
    key = model.input_names[0]
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({key: x}, y)).batch(64).repeat(),
              steps=steps)
    kernel = [v for v in est.get_variable_names() if v.endswith('kernel')][0]
    kernels['%s %s' % (kind, name)] = est.get_variable_value(kernel).ravel().tolist()
print(json.dumps({'keras_module': tf.keras.Model.__module__, 'eager': tf.executing_eagerly(),
                  'kernels': kernels}))
'''


def _run_user_program(mode, tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  env.pop('TF_USE_LEGACY_KERAS', None)  # as an ordinary user's shell
  proc = subprocess.run(
      [sys.executable, '-c', USER_PROGRAM, mode, str(tmp_path / 'models'), str(STEPS),
       json.dumps(OPTIMIZERS)],
      capture_output=True, text=True, env=env, timeout=500, cwd=REPO_ROOT)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def _sgd_kernel(learning_rate, momentum):
  """The kernel after STEPS momentum-SGD steps on the program's batch (MSE, zero start)."""
  x = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float64)
  y = x @ np.array([[1.0], [-2.0], [0.5]])
  w, b = np.zeros((3, 1)), 0.0
  vw, vb = np.zeros((3, 1)), 0.0
  for _ in range(STEPS):
    residual = x @ w + b - y
    grad_w, grad_b = 2.0 / len(x) * x.T @ residual, 2.0 / len(x) * residual.sum()
    vw, vb = momentum * vw - learning_rate * grad_w, momentum * vb - learning_rate * grad_b
    w, b = w + vw, b + vb
  return w.ravel()


@pytest.mark.parametrize('mode', ['eager', 'graph'])
def test_tf_keras_model_with_string_and_object_optimizers(mode, tmp_path):
  report = _run_user_program(mode, tmp_path)
  assert report['keras_module'].startswith('tf_keras'), report
  assert report['eager'] == (mode == 'eager')
  kernels = {key: np.array(value) for key, value in report['kernels'].items()}
  sign = np.sign(_sgd_kernel(0.01, 0.0))
  for kind in ('functional', 'sequential'):
    np.testing.assert_allclose(kernels[kind + ' sgd'], _sgd_kernel(0.01, 0.0), rtol=1e-4)
    np.testing.assert_allclose(kernels[kind + ' SGD(learning_rate=1e-4, momentum=0.9)'],
                               _sgd_kernel(1e-4, 0.9), rtol=1e-4)
    # Adam's first steps move each weight by about its learning rate (0.001).
    np.testing.assert_allclose(kernels[kind + ' adam'], 2 * 0.001 * sign, rtol=0.02)
    # RMSprop (rho 0.9): 0.001 / sqrt(0.1), then 0.001 / sqrt(0.19) for a steady gradient;
    # the gradient shrinks a little in step 2.
    rmsprop = np.abs(kernels[kind + ' rmsprop'])
    assert np.all(np.sign(kernels[kind + ' rmsprop']) == sign)
    assert np.all((rmsprop > 0.0045) & (rmsprop < 0.0056)), rmsprop


# The same user touching tf.keras before importing slimtrain: tf.keras is Keras 3 then.
KERAS_3_FIRST_PROGRAM = r'''
import json, sys
import tensorflow as tf
model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
model.compile(optimizer='sgd', loss='mse')
from trainer import estimator as tfe
try:
  tfe.keras.model_to_estimator(keras_model=model, model_dir=sys.argv[1])
  print(json.dumps({'error': None}))
except TypeError as e:
  print(json.dumps({'error': str(e), 'keras_module': type(model).__module__}))
'''


def test_tf_keras_touched_before_slimtrain_is_keras_3_and_the_error_says_what_to_do(tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  env.pop('TF_USE_LEGACY_KERAS', None)
  proc = subprocess.run([sys.executable, '-c', KERAS_3_FIRST_PROGRAM, str(tmp_path / 'm')],
                        capture_output=True, text=True, env=env, timeout=300, cwd=REPO_ROOT)
  assert proc.returncode == 0, proc.stderr[-4000:]
  report = json.loads(proc.stdout.strip().splitlines()[-1])
  if not report.get('keras_module', '').startswith('keras'):
    pytest.skip('tf.keras is not Keras 3 in this environment')
  assert 'Keras 3 model' in report['error']
  assert 'import slimtrain before the program first uses `tf.keras`' in report['error']
  assert 'TF_USE_LEGACY_KERAS' in report['error']


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
