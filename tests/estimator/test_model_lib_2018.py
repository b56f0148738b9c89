"""The 2018 generation of the OD API's model_lib beside the 2019 one, each called exactly as
its `model_main.py` calls it: `model_hparams.create_hparams`, `create_estimator_and_inputs`
(`eval_steps`; the dict's `eval_input_fn` / `eval_steps`), `create_train_and_eval_specs`
with six positional arguments, `continuous_eval(estimator, dir, input_fn, eval_steps,
train_steps, name)`; calls the two could read differently are errors, not misbindings.
A 2018-style model_main program (tests/trainer/model_main_2018.py) trains and evaluates
the small SSD."""

import glob
import os
import sys

import pytest
import tensorflow as tf

from estimator.hparams import HParams
from tests import fork_server
from tests.estimator import model_lib_testlib
from tools import create_shapes_tf_record
from trainer import estimator as tfe
from trainer import model_hparams
from trainer import model_lib
from trainer import model_lib_2018

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEYS_2018 = {'estimator', 'train_input_fn', 'eval_input_fn', 'eval_on_train_input_fn',
             'predict_input_fn', 'train_steps', 'eval_steps'}
KEYS_2019 = {'estimator', 'train_input_fn', 'eval_input_fns', 'eval_input_names',
             'eval_on_train_input_fn', 'predict_input_fn', 'train_steps'}


@pytest.fixture(scope='module')
def config_path(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp('model_lib_2018'))
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(directory, 'data'), num_train=8, num_val=3, height=64, width=64)
  return model_lib_testlib.write_small_config(directory, data)


def test_model_hparams_create_hparams():
  hparams = model_hparams.create_hparams()
  assert isinstance(hparams, HParams) and hparams.load_pretrained is True
  assert model_hparams.create_hparams(None).load_pretrained is True
  assert model_hparams.create_hparams('load_pretrained=false').load_pretrained is False
  assert model_lib.create_hparams is model_hparams.create_hparams
  with pytest.raises(ValueError, match='no_such_hparam'):
    model_hparams.create_hparams('no_such_hparam=1')


def test_2018_model_main_call_gets_the_2018_dict(config_path, tmp_path):
  # 2018 model_main.py, imports changed.
  config = tfe.RunConfig(model_dir=str(tmp_path))
  train_and_eval_dict = model_lib.create_estimator_and_inputs(
      run_config=config,
      hparams=model_hparams.create_hparams(None),
      pipeline_config_path=config_path,
      train_steps=5,
      eval_steps=2)
  assert set(train_and_eval_dict) == KEYS_2018
  assert train_and_eval_dict['train_steps'] == 5
  assert train_and_eval_dict['eval_steps'] == 2
  assert isinstance(train_and_eval_dict['estimator'], tfe.Estimator)
  assert callable(train_and_eval_dict['eval_input_fn'])
  # Without --num_eval_steps: eval_config.num_examples, as 2018 did.
  default = model_lib.create_estimator_and_inputs(
      run_config=config, hparams=model_hparams.create_hparams(None),
      pipeline_config_path=config_path, train_steps=None, eval_steps=None)
  assert set(default) == KEYS_2018
  assert (default['train_steps'], default['eval_steps']) == (3, 64)
  # The 2018 positional order: train_steps, eval_steps, model_fn_creator, ...
  positional = model_lib.create_estimator_and_inputs(
      config, model_hparams.create_hparams(), config_path, 4, 1, model_lib.create_model_fn)
  assert (positional['train_steps'], positional['eval_steps']) == (4, 1)
  positional = model_lib.create_estimator_and_inputs(config, None, config_path, 4)
  assert set(positional) == KEYS_2018 and positional['train_steps'] == 4
  with pytest.raises(ValueError, match='eval_steps must be a positive int'):
    model_lib.create_estimator_and_inputs(config, None, config_path, eval_steps=0)
  # 2018 had no default for hparams and pipeline_config_path.
  with pytest.raises(TypeError, match=r"2018 OD API signature.*'pipeline_config_path'"):
    model_lib.create_estimator_and_inputs(config, None, eval_steps=1)


def test_2019_model_main_call_keeps_the_2019_dict(config_path, tmp_path):
  # 2019 model_main.py, imports changed.
  train_and_eval_dict = model_lib.create_estimator_and_inputs(
      run_config=tfe.RunConfig(model_dir=str(tmp_path)),
      hparams=model_hparams.create_hparams(None),
      pipeline_config_path=config_path,
      train_steps=5,
      sample_1_of_n_eval_examples=1,
      sample_1_of_n_eval_on_train_examples=5)
  assert set(train_and_eval_dict) == KEYS_2019
  assert train_and_eval_dict['train_steps'] == 5
  with pytest.raises(KeyError, match='Pass eval_steps='):
    train_and_eval_dict['eval_input_fn']  # pylint: disable=pointless-statement
  with pytest.raises(KeyError):
    train_and_eval_dict['no_such_key']  # pylint: disable=pointless-statement
  # 2019 positional: config_override (a text proto) fourth.
  positional = model_lib.create_estimator_and_inputs(
      tfe.RunConfig(model_dir=str(tmp_path)), None, config_path,
      'train_config { batch_size: 2 }', 6)
  assert set(positional) == KEYS_2019 and positional['train_steps'] == 6
  # None then an int: config_override + train_steps (2019) or train_steps + eval_steps (2018).
  with pytest.raises(TypeError, match='pass the arguments after pipeline_config_path by '
                     'keyword'):
    model_lib.create_estimator_and_inputs(tfe.RunConfig(model_dir=str(tmp_path)), None,
                                          config_path, None, 6)


def _input_fn():
  return None


def _serving_fn():
  return None


def test_create_train_and_eval_specs_of_both_generations():
  # 2018 model_main.py: six positional arguments, the sixth eval_steps.
  train_spec, eval_specs = model_lib.create_train_and_eval_specs(
      _input_fn, _input_fn, _input_fn, _serving_fn, 10, 3, eval_on_train_data=False)
  assert train_spec.max_steps == 10
  assert len(eval_specs) == 1
  assert (eval_specs[0].name, eval_specs[0].steps) == ('eval', 3)
  assert eval_specs[0].exporters[0].name == 'Servo'
  _, eval_specs = model_lib.create_train_and_eval_specs(
      _input_fn, _input_fn, _input_fn, _serving_fn, 10, None, True, 'Exported', 'val')
  assert [(s.name, s.steps) for s in eval_specs] == [('val', None), ('eval_on_train', None)]
  assert eval_specs[0].exporters[0].name == 'Exported'
  _, eval_specs = model_lib.create_train_and_eval_specs(
      train_input_fn=_input_fn, eval_input_fn=_input_fn, eval_on_train_input_fn=_input_fn,
      predict_input_fn=_serving_fn, train_steps=10, eval_steps=4)
  assert eval_specs[0].steps == 4

  # 2019 model_main.py: a list of eval input_fns, then eval_on_train_data.
  train_spec, eval_specs = model_lib.create_train_and_eval_specs(
      _input_fn, [_input_fn, _input_fn], _input_fn, _serving_fn, 10,
      eval_on_train_data=False)
  assert [(s.name, s.steps) for s in eval_specs] == [('0', None), ('1', None)]
  assert [s.exporters[0].name for s in eval_specs] == ['Servo', 'Servo_1']
  _, eval_specs = model_lib.create_train_and_eval_specs(
      _input_fn, [_input_fn], _input_fn, _serving_fn, 10, True)
  assert [s.name for s in eval_specs] == ['0', 'eval_on_train']

  # A 2018 eval_steps where 2019 has eval_on_train_data, or one fn where 2019 has a list.
  with pytest.raises(TypeError, match='eval_on_train_data .* is 3, an int'):
    model_lib.create_train_and_eval_specs(_input_fn, [_input_fn], _input_fn, _serving_fn,
                                          10, 3)
  with pytest.raises(TypeError, match='eval_input_fns must be a list'):
    model_lib.create_train_and_eval_specs(_input_fn, eval_input_fns=_input_fn,
                                          eval_on_train_input_fn=_input_fn,
                                          predict_input_fn=_serving_fn, train_steps=10)


def test_continuous_eval_calls_are_read_for_their_generation():
  is_2018 = model_lib_2018.is_2018_continuous_eval_call
  est, fn = object(), _input_fn
  assert is_2018((est, '/d', fn, 2, 10, 'validation_data'), {})          # 2018 model_main
  assert is_2018((est, '/d', fn, None, 10, 'training_data'), {})
  assert is_2018((est, '/d', fn, 2, 10), {'name': 'x'})
  assert is_2018((est, '/d', fn, 2), {'train_steps': 10, 'name': 'x'})
  assert is_2018((), {'estimator': est, 'model_dir': '/d', 'input_fn': fn, 'eval_steps': 2,
                      'train_steps': 10, 'name': 'x'})
  assert not is_2018((est, '/d', fn, 10, 'validation_data'), {})          # 2019 model_main
  assert not is_2018((est, '/d', fn, 10, 'x', 180, None), {})
  assert not is_2018((est, '/d', fn, 10), {'name': 'x', 'min_interval_secs': 1})


def test_continuous_eval_2018_evaluates_eval_steps_batches_until_train_steps(config_path,
                                                                           tmp_path):
  model_dir = str(tmp_path / 'model')
  train_and_eval_dict = model_lib.create_estimator_and_inputs(
      run_config=tfe.RunConfig(model_dir=model_dir), hparams=model_hparams.create_hparams(),
      pipeline_config_path=config_path, train_steps=1, eval_steps=1)
  estimator = train_and_eval_dict['estimator']
  estimator.train(train_and_eval_dict['train_input_fn'], max_steps=1)
  metrics = model_lib.continuous_eval(estimator, model_dir,
                                      train_and_eval_dict['eval_input_fn'],
                                      train_and_eval_dict['eval_steps'],
                                      train_and_eval_dict['train_steps'], 'validation_data')
  assert metrics['global_step'] == 1
  assert 'DetectionBoxes_Precision/mAP' in metrics
  assert glob.glob(os.path.join(model_dir, 'eval_validation_data', 'events.out.tfevents.*'))


def test_a_graph_rewriter_is_refused_in_both_generations(config_path, tmp_path):
  with open(config_path) as f:
    text = f.read()
  quantized = str(tmp_path / 'quantized.config')
  with open(quantized, 'w') as f:
    f.write(text + 'graph_rewriter { quantization { delay: 10 } }\n')
  for extra in ({'eval_steps': 1}, {}):
    with pytest.raises(ValueError, match=r'graph_rewriter.quantization \(delay 10'):
      model_lib.create_estimator_and_inputs(
          run_config=tfe.RunConfig(model_dir=str(tmp_path)), hparams=None,
          pipeline_config_path=quantized, **extra)


def test_our_model_main_takes_the_2018_flags():
  from absl import flags  # pylint: disable=import-outside-toplevel
  from trainer import model_main  # pylint: disable=import-outside-toplevel
  model_main.define_flags()
  for name in ('hparams_overrides', 'num_eval_steps', 'eval_training_data', 'checkpoint_dir',
               'run_once', 'num_train_steps'):
    assert name in flags.FLAGS, name
  assert flags.FLAGS['num_eval_steps'].default is None


def test_2018_model_main_program_trains_and_evaluates(config_path, tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  env.pop('TF_CONFIG', None)

  def model_main(*flags):
    proc = fork_server.run([sys.executable, '-m', 'tests.trainer.model_main_2018'] +
                           list(flags) + ['--pipeline_config_path=' + config_path],
                           capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=500)
    assert proc.returncode == 0, proc.stderr[-5000:]
    return proc.stderr

  model_dir = str(tmp_path / 'model')
  log = model_main('--model_dir=' + model_dir, '--num_train_steps=2', '--num_eval_steps=1',
                   '--hparams_overrides=load_pretrained=false')
  assert tf.train.latest_checkpoint(model_dir).endswith('model.ckpt-2')
  assert glob.glob(os.path.join(model_dir, 'eval_eval', 'events.out.tfevents.*'))
  assert glob.glob(os.path.join(model_dir, 'export', 'Servo', '*', 'saved_model.pb'))
  assert 'DetectionBoxes_Precision/mAP@.50IOU' in log

  # Eval-only, once, on the training data; then "continuously" (its last step is reached).
  eval_dir = str(tmp_path / 'eval_only')
  model_main('--model_dir=' + eval_dir, '--checkpoint_dir=' + model_dir, '--run_once',
             '--eval_training_data', '--num_eval_steps=1')
  assert glob.glob(os.path.join(eval_dir, 'eval', 'events.out.tfevents.*'))
  log = model_main('--model_dir=' + eval_dir, '--checkpoint_dir=' + model_dir,
                   '--num_train_steps=2', '--num_eval_steps=1')
  assert glob.glob(os.path.join(eval_dir, 'eval_validation_data', 'events.out.tfevents.*'))
  assert 'Evaluation finished after training step 2' in log


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
