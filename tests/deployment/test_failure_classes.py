"""Exit codes by failure class, and the chief's start-up check of its output directory.

The programs run as real processes: a directory the chief may not write
(root without CAP_DAC_OVERRIDE, so the kernel's permission check applies), a
missing config file and a bad flag for real; the failures a test machine
cannot produce on demand (a storage EIO, an unavailable service, a GPU that
fails to initialise) raised where the program first touches storage by
tests/deployment/fault_injection_main.py, from where they travel through the
program's own main.
"""

import ctypes
import errno
import os
import sys

import pytest
import tensorflow as tf

from deployment import exit_codes
from deployment import startup_checks
from tests import fork_server
from tests.estimator import model_lib_testlib
from tools import create_shapes_tf_record

tf.compat.v1.disable_eager_execution()

# Whole backbones' graphs or real processes: tens of seconds.
pytestmark = pytest.mark.slow

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


@pytest.fixture(scope='module')
def config_path(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp('failure_classes'))
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(directory, 'data'), num_train=2, num_val=1, height=64, width=64,
      num_shards=1)
  pipeline = model_lib_testlib.small_config(data, num_steps=2)
  pipeline.deploy_config.num_clones = 1
  from core import config_util  # pylint: disable=import-outside-toplevel
  return config_util.save_pipeline_config(pipeline, directory)


def _env(**extra):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), **extra)
  env.pop('TF_CONFIG', None)
  return env


def _run(args, env=None, **kwargs):
  return fork_server.run([sys.executable, '-m'] + args, capture_output=True, text=True,
                         cwd=REPO_ROOT, env=env or _env(), timeout=300, **kwargs)


def _without_dac_override():
  """preexec_fn: the child, still root, obeys file permissions like any user."""
  libc = ctypes.CDLL(None, use_errno=True)
  for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
    if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
      raise OSError(ctypes.get_errno(), 'prctl(PR_CAPBSET_DROP) failed')


def _read_only_dir(tmp_path):
  directory = tmp_path / 'volume'
  directory.mkdir()
  directory.chmod(0o555)
  return str(directory)


# The start-up check ----------------------------------------------------------------------


@pytest.mark.parametrize('program,flag', [('trainer.train', 'train_dir'),
                                          ('trainer.model_main', 'model_dir')])
def test_chief_that_cannot_write_its_directory_exits_1_naming_path_uid_and_fix(
    config_path, tmp_path, program, flag):
  directory = _read_only_dir(tmp_path)
  proc = _run([program, '--pipeline_config_path=' + config_path,
               '--%s=%s' % (flag, directory)], preexec_fn=_without_dac_override)
  assert proc.returncode == exit_codes.PERMANENT, proc.stderr[-4000:]
  message = '--%s=%s is not writable by this process (uid %d, gid %d)' % (
      flag, directory, os.getuid(), os.getgid())
  assert message in proc.stderr, proc.stderr[-4000:]
  assert 'Permission denied' in proc.stderr
  assert '--run_as_user=%d --fs_group=GID' % os.getuid() in proc.stderr
  assert 'chown -R %d %s' % (os.getuid(), directory) in proc.stderr
  # It stopped before building anything, and left nothing behind.
  assert 'building the training graph' not in proc.stderr
  assert os.listdir(directory) == []


def test_check_writable_leaves_a_writable_directory_as_it_was(tmp_path):
  target = str(tmp_path / 'new' / 'train')
  startup_checks.check_writable(target, '--train_dir')
  assert os.listdir(target) == []


def test_bucket_fix_names_the_service_account():
  error = tf.errors.PermissionDeniedError(None, None, 'Error executing an HTTP request: 403')
  message = startup_checks._message('gs://bucket/train', '--train_dir', error)  # pylint: disable=protected-access
  assert message.startswith('--train_dir=gs://bucket/train is not writable by this process '
                            '(uid %d' % os.getuid())
  assert '--service_account=NAME' in message and 'Workload Identity' in message


# Classes of failures, in process ----------------------------------------------------------


@pytest.mark.parametrize('error,code,failure_class', [
    (tf.errors.UnavailableError(None, None, 'Socket closed'), 129, 'unavailable'),
    (tf.errors.DeadlineExceededError(None, None, 'slow'), 129, 'deadline exceeded'),
    (tf.errors.AbortedError(None, None, 'again'), 129, 'aborted'),
    (OSError(errno.EIO, os.strerror(errno.EIO)), 129, 'transient storage error (EIO)'),
    (OSError(errno.ECONNRESET, 'reset'), 129, 'transient storage error (ECONNRESET)'),
    (tf.errors.UnknownError(None, None, 'x; Input/output error'), 129,
     'transient storage error (UnknownError)'),
    (tf.errors.InternalError(None, None, 'failed call to cuInit: CUDA_ERROR_UNKNOWN'), 129,
     'GPU initialisation failure'),
    (ValueError('bad config'), 1, 'permanent'),
    (FileNotFoundError(errno.ENOENT, 'No such file or directory'), 1, 'permanent'),
    (PermissionError(errno.EACCES, 'Permission denied'), 1, 'permanent'),
    (tf.errors.NotFoundError(None, None, 'missing'), 1, 'permanent'),
    (tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating'), 1, 'permanent'),
    (tf.errors.InvalidArgumentError(None, None, 'NaN in loss'), 1, 'permanent'),
])
def test_classify(error, code, failure_class):
  found = exit_codes.classify(error)
  assert found.code == code
  assert found.failure_class.startswith(failure_class), found.failure_class
  assert type(error).__name__ in found.reason


def test_a_cause_that_is_transient_makes_the_failure_retryable():
  try:
    try:
      raise OSError(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT))
    except OSError as e:
      raise ValueError('could not read the checkpoint') from e
  except ValueError as e:
    assert exit_codes.classify(e).code == exit_codes.RETRYABLE


# Classes of failures, as processes --------------------------------------------------------


_RETRYABLE = {'eio': 'transient storage error (EIO)', 'etimedout': 'transient storage error '
              '(ETIMEDOUT)', 'econnreset': 'transient storage error (ECONNRESET)',
              'unavailable': 'unavailable', 'deadline_exceeded': 'deadline exceeded',
              'aborted': 'aborted', 'gfile_eio': 'transient storage error (UnknownError)',
              'cuda_init': 'GPU initialisation failure'}


@pytest.mark.parametrize('fault', sorted(_RETRYABLE))
def test_train_exits_129_on_a_transient_failure(config_path, tmp_path, fault):
  proc = _run(['tests.deployment.fault_injection_main', 'trainer.train',
               '--pipeline_config_path=' + config_path, '--train_dir=' + str(tmp_path / 't')],
              env=_env(INJECT_AT='deployment.startup_checks:check_writable',
                       INJECT_FAULT=fault))
  assert proc.returncode == exit_codes.RETRYABLE, proc.stderr[-4000:]
  assert 'trainer.train: retryable failure (%s' % _RETRYABLE[fault] in proc.stderr
  assert proc.stderr.rstrip().endswith('; exiting 129'), proc.stderr[-2000:]


@pytest.mark.parametrize('fault', ['not_found', 'enoent', 'value_error'])
def test_train_exits_1_on_a_permanent_failure(config_path, tmp_path, fault):
  proc = _run(['tests.deployment.fault_injection_main', 'trainer.train',
               '--pipeline_config_path=' + config_path, '--train_dir=' + str(tmp_path / 't')],
              env=_env(INJECT_AT='deployment.startup_checks:check_writable',
                       INJECT_FAULT=fault))
  assert proc.returncode == exit_codes.PERMANENT, proc.stderr[-4000:]
  assert 'trainer.train: permanent failure: ' in proc.stderr


@pytest.mark.parametrize('program,fault,code', [
    ('trainer.model_main', 'eio', 129), ('trainer.model_main', 'value_error', 1)])
def test_model_main_exit_codes(config_path, tmp_path, program, fault, code):
  proc = _run(['tests.deployment.fault_injection_main', program,
               '--pipeline_config_path=' + config_path, '--model_dir=' + str(tmp_path / 'm')],
              env=_env(INJECT_AT='deployment.startup_checks:check_writable',
                       INJECT_FAULT=fault))
  assert proc.returncode == code, proc.stderr[-4000:]
  assert '%s: %s failure' % (program, 'retryable' if code == 129 else 'permanent') in (
      proc.stderr)


@pytest.mark.parametrize('fault,code', [('unavailable', 129), ('cuda_init', 129),
                                        ('value_error', 1)])
def test_eval_exit_codes(config_path, tmp_path, fault, code):
  proc = _run(['tests.deployment.fault_injection_main', 'trainer.eval',
               '--pipeline_config_path=' + config_path, '--checkpoint_dir=' + str(tmp_path),
               '--eval_dir=' + str(tmp_path / 'eval')],
              env=_env(INJECT_AT='trainer.evaluator:evaluate_from_configs', INJECT_FAULT=fault))
  assert proc.returncode == code, proc.stderr[-4000:]
  if code == 129:
    assert 'trainer.eval: retryable failure (%s' % _RETRYABLE[fault] in proc.stderr


def test_user_errors_stay_permanent_for_real(config_path, tmp_path):
  missing = str(tmp_path / 'missing.config')
  proc = _run(['trainer.train', '--pipeline_config_path=' + missing,
               '--train_dir=' + str(tmp_path / 't')])
  assert proc.returncode == exit_codes.PERMANENT, proc.stderr[-4000:]
  assert 'pipeline config file not found: %s' % missing in proc.stderr
  assert 'trainer.train: permanent failure: ValueError' in proc.stderr

  proc = _run(['trainer.train', '--pipeline_config_path=' + config_path,
               '--train_dir=' + str(tmp_path / 't'), '--num_clones=two'])
  assert proc.returncode == exit_codes.PERMANENT, proc.stderr[-4000:]
  assert '--num_clones' in proc.stderr


def test_an_unreachable_master_exits_129_after_the_startup_timeout(tmp_path):
  from core import config_util  # pylint: disable=import-outside-toplevel
  from deployment import ports  # pylint: disable=import-outside-toplevel
  data = create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path / 'data'), num_train=2, num_val=1, height=64, width=64, num_shards=1)
  pipeline = model_lib_testlib.small_config(data, num_steps=2)
  pipeline.deploy_config.startup_timeout_secs = 2
  config = config_util.save_pipeline_config(pipeline, str(tmp_path))
  closed = ports.pick_unused_ports(1)[0]
  proc = _run(['trainer.train', '--pipeline_config_path=' + config,
               '--train_dir=%s' % (tmp_path / 'train'), '--master=grpc://127.0.0.1:%d' % closed])
  # Before: the session waited on the target forever.
  assert proc.returncode == exit_codes.RETRYABLE, proc.stderr[-3000:]
  assert 'the --master 127.0.0.1:%d still unreachable' % closed in proc.stderr


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
