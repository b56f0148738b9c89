"""`trainer.train_settings`: train()'s run settings as one typed object.

How a `train()` call's arguments become one `TrainSettings`: the OD API's
positional shape, its keywords, slimtrain's later keywords and a settings
object, with the errors a user sees for a bad call. (Training with them runs in
tests/trainer/test_trainer.py.)
"""

import dataclasses
import inspect
import sys

import pytest

from trainer import train_settings
from trainer import trainer
from trainer.train_settings import TrainSettings


def _od_arguments(*values):
  """The OD run arguments of a positional train() call, by name."""
  return dict(zip(train_settings.OD_RUN_ARGUMENTS, values))


def test_the_od_positional_shape_fills_every_run_field():
  run = train_settings.resolve(None, {}, **_od_arguments(
      'grpc://chief:2222', 3, 2, 4, True, 2, 'worker', False, '/tmp/train'))
  assert run == TrainSettings(master='grpc://chief:2222', task=3, num_clones=2,
                              worker_replicas=4, clone_on_cpu=True, ps_tasks=2,
                              worker_job_name='worker', is_chief=False, train_dir='/tmp/train')


def test_train_keeps_the_od_signature_then_graph_hook_then_settings():
  names = list(inspect.signature(trainer.train).parameters)
  assert names[:13] == ['create_tensor_dict_fn', 'create_model_fn', 'train_config',
                        *train_settings.OD_RUN_ARGUMENTS, 'graph_hook_fn']
  assert names[13:] == ['settings', 'more_settings']
  assert trainer.TrainSettings is TrainSettings


def test_given_arguments_override_the_settings_object_and_later_keywords_still_work():
  def on_finish(sess, step):  # pylint: disable=unused-argument
    pass

  base = TrainSettings(train_dir='/tmp/a', num_clones=2, startup_timeout_secs=30)
  run = train_settings.resolve(base, {'on_finish': on_finish, 'startup_timeout_secs': 5},
                               task=1, is_chief=False, master=None)
  assert (run.train_dir, run.num_clones, run.task, run.is_chief) == ('/tmp/a', 2, 1, False)
  assert run.on_finish is on_finish and run.startup_timeout_secs == 5
  assert base.task == 0  # the caller's object is not changed
  # master='' is a real value (in-process), not "not given".
  assert train_settings.resolve(dataclasses.replace(base, master='grpc://x:1'), {},
                                master='').master == ''


def test_bad_calls_name_what_is_wrong():
  with pytest.raises(TypeError, match="unexpected keyword argument 'session_config'"):
    train_settings.resolve(None, {'session_config': None}, train_dir='/tmp/t')
  with pytest.raises(ValueError, match='needs a train_dir'):
    train_settings.resolve(None, {}, task=0)
  with pytest.raises(TypeError, match='must be a trainer.train_settings.TrainSettings'):
    train_settings.resolve({'train_dir': '/tmp/t'}, {})
  with pytest.raises(TypeError, match='TrainSettings.task must be an int'):
    TrainSettings(task='0')
  with pytest.raises(ValueError, match='num_clones must be positive or -1'):
    TrainSettings(num_clones=0)
  with pytest.raises(ValueError, match='startup_timeout_secs must be positive'):
    TrainSettings(startup_timeout_secs=0)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
