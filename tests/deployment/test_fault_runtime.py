"""The one fault runtime of both training paths: its settings and its session.

Both `python -m trainer.train` (from a pipeline's deploy_config) and the
Estimator (from a RunConfig) build a `fault_runtime.FaultSettings`; these
tests check that each maps its fields onto it and names its own fields in
messages and errors, and that the `BoundedSession` the loops run their
steps through is usable wherever a TF session is (run, Saver, hooks) and
closes within its bound, and that a step TensorFlow refuses as a repeated
request id runs again in the same session, while the ps loop and the chief's
membership log poll on (in a process whose /dev/urandom the test controls, so
that TensorFlow's own refusal happens at once:
tests/deployment/repeated_request_main.py). The cluster behaviour itself is
tested by the cluster fault tests of both paths.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from builders import deploy_config_builder
from deployment import cluster as cluster_lib
from deployment import fault_runtime
from deployment import ports
from deployment import request_ids
from protos import pipeline_pb2
from trainer import estimator as tfe
from estimator import faults as estimator_faults

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

tf.compat.v1.disable_eager_execution()


def _ps_cluster(task_type='chief'):
  """A ClusterConfig of a chief, a worker and one ps on loopback ports nobody serves."""
  chief, worker, ps = ['127.0.0.1:%d' % p for p in ports.pick_unused_ports(3)]
  return cluster_lib.ClusterConfig(
      cluster={'chief': [chief], 'worker': [worker], 'ps': [ps]},
      task_type=task_type, task_index=0)


def test_deploy_config_builds_the_runtime_settings_naming_deploy_config_fields():
  settings = deploy_config_builder.cluster_timeouts(
      pipeline_pb2.DeployConfig(recovery_timeout_secs=40, termination_grace_secs=9))
  assert isinstance(settings, fault_runtime.FaultSettings)
  assert (settings.recovery, settings.termination_grace, settings.startup) == (40, 9, 600)
  assert settings.setting('recovery') == 'deploy_config.recovery_timeout_secs'
  assert settings.setting('startup') == 'deploy_config.startup_timeout_secs'
  with pytest.raises(ValueError, match=r'deploy_config\.chief_timeout_secs must be positive'):
    deploy_config_builder.cluster_timeouts(pipeline_pb2.DeployConfig(chief_timeout_secs=0))


def test_run_config_maps_onto_the_same_settings_naming_run_config_fields():
  config = tfe.RunConfig(recovery_timeout_secs=15, termination_grace_secs=5,
                         chief_timeout_secs=20, session_creation_timeout_secs=60)
  settings = estimator_faults.fault_settings(config)
  assert settings == fault_runtime.FaultSettings(
      startup=60, chief=20, termination_grace=5, replica=300, recovery=15, source='RunConfig',
      snapshot_interval=5.0)
  assert settings.setting('startup') == 'RunConfig.session_creation_timeout_secs'
  assert settings.setting('snapshot_interval') == 'RunConfig.snapshot_interval_secs'
  assert settings.setting('termination_grace') == 'RunConfig.termination_grace_secs'


@pytest.mark.parametrize('bad', [0, -3, None, True, '30'])
def test_a_bad_run_config_timeout_is_refused_naming_the_run_config_field(bad):
  with pytest.raises(ValueError, match=r'RunConfig\.recovery_timeout_secs must be a positive '
                                       r'number of seconds'):
    fault_runtime.check_timeout('RunConfig', 'recovery_timeout_secs', bad)
  with pytest.raises(ValueError, match=r'RunConfig\.termination_grace_secs must be a positive'):
    tfe.RunConfig(termination_grace_secs=bad)


@pytest.mark.parametrize('bad', [-1, None, True, '5', float('nan')])
def test_a_bad_snapshot_interval_is_refused_naming_its_field(bad):
  with pytest.raises(ValueError, match=r'RunConfig\.snapshot_interval_secs must be 0 \(off\) '
                                       r'or a positive number of seconds'):
    tfe.RunConfig(snapshot_interval_secs=bad)


def test_the_snapshot_interval_of_a_deploy_config_reaches_the_run_config():
  deploy = pipeline_pb2.DeployConfig(snapshot_interval_secs=0)
  config = estimator_faults.apply_deploy_config_timeouts(tfe.RunConfig(), deploy)
  assert config.snapshot_interval_secs == 0
  assert estimator_faults.fault_settings(config).snapshot_interval == 0
  # Set in code, the RunConfig wins; unset in the file, the RunConfig keeps its value.
  in_code = tfe.RunConfig(snapshot_interval_secs=2)
  assert estimator_faults.apply_deploy_config_timeouts(in_code, deploy).snapshot_interval_secs == 2
  assert estimator_faults.apply_deploy_config_timeouts(
      tfe.RunConfig(), pipeline_pb2.DeployConfig()).snapshot_interval_secs == 5


def test_a_deploy_config_timeout_the_file_sets_reaches_the_run_config_checked():
  deploy = pipeline_pb2.DeployConfig(recovery_timeout_secs=40)
  config = estimator_faults.apply_deploy_config_timeouts(tfe.RunConfig(), deploy)
  assert config.recovery_timeout_secs == 40
  # A bad field elsewhere in the same deploy_config is named, not ignored.
  with pytest.raises(ValueError, match=r'deploy_config\.startup_timeout_secs must be positive'):
    estimator_faults.apply_deploy_config_timeouts(
        tfe.RunConfig(), pipeline_pb2.DeployConfig(startup_timeout_secs=0))


def test_task_faults_of_a_ps_cluster_bound_steps_and_name_the_fields_of_their_config():
  cluster = _ps_cluster()
  legacy = fault_runtime.TaskFaults(
      deploy_config_builder.cluster_timeouts(pipeline_pb2.DeployConfig()), cluster,
      master='', is_chief=True, sync_replicas=True)
  assert legacy.step_timeout_secs == 300 + 300
  assert legacy.step_timeout_setting == ('deploy_config.replica_timeout_secs + '
                                         'recovery_timeout_secs')
  assert [name for name, _ in legacy.session_peers] == ['/job:ps/task:0']
  assert legacy.replica_names == ['/job:chief/task:0', '/job:worker/task:0']
  assert legacy.watches_replicas and legacy.end_job is not None
  estimator = fault_runtime.TaskFaults(
      estimator_faults.fault_settings(tfe.RunConfig()), cluster, is_chief=True)
  assert estimator.step_timeout_setting == 'RunConfig.recovery_timeout_secs'
  # A master evaluates inside its steps: no step deadline.
  assert fault_runtime.TaskFaults(estimator.settings, cluster, watch_steps=False).step_watch is None
  # Outside a cluster only the termination grace is left.
  local = fault_runtime.TaskFaults(legacy.settings, cluster_lib.ClusterConfig())
  assert (local.recovery, local.step_watch, local.session_peers) == (None, None, [])
  assert local.termination_grace_secs == 25


def test_a_lost_peer_starts_one_recovery_that_the_next_session_ends():
  faults = fault_runtime.TaskFaults(
      deploy_config_builder.cluster_timeouts(pipeline_pb2.DeployConfig(
          recovery_timeout_secs=3600)), _ps_cluster(), is_chief=True)
  lost = tf.errors.UnavailableError(None, None, 'From /job:ps/replica:0/task:0: gone')
  with pytest.raises(tf.errors.UnavailableError):
    with faults.noting_lost_peers(lambda: 7):
      raise lost
  assert faults.recovery.recovering
  # While recovering, the broken session's close is given a few seconds only.
  assert faults.close_timeout_secs() == fault_runtime.RECOVERY_CLOSE_SECS
  faults.note_lost_peer(lost, 9)  # The same recovery goes on.
  faults.recovery.resumed(5)
  assert not faults.recovery.recovering
  assert faults.close_timeout_secs() == 25


def test_a_loss_seen_outside_a_step_names_the_last_step_the_task_reached(caplog):
  faults = fault_runtime.TaskFaults(
      deploy_config_builder.cluster_timeouts(pipeline_pb2.DeployConfig(
          recovery_timeout_secs=3600)), _ps_cluster(), is_chief=True)
  faults.step_done(141)
  with caplog.at_level('WARNING'):
    # E.g. the Supervisor's checkpoint thread met the lost ps first.
    faults.note_lost_peer(tf.errors.UnavailableError(
        None, None, 'From /job:ps/replica:0/task:0: gone'), None)
  assert 'lost /job:ps/task:0 at global step 141 (' in caplog.text
  faults.recovery.resumed(141)


def test_bounded_session_runs_saves_and_closes_a_real_session(tmp_path):
  faults = fault_runtime.TaskFaults(
      deploy_config_builder.cluster_timeouts(pipeline_pb2.DeployConfig()), _ps_cluster(),
      is_chief=True)
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    increment = tf.compat.v1.assign_add(step, 1)
    saver = tf.compat.v1.train.Saver()
    raw = tf.compat.v1.Session()
    session = fault_runtime.BoundedSession(raw, faults)
    session.run(tf.compat.v1.global_variables_initializer())
    assert session.run(increment) == 1
    assert session.graph is raw.graph
    # Savers and queue runners take it for the session it holds.
    path = saver.save(session, str(tmp_path / 'model.ckpt'), global_step=1)
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
    assert tf.compat.v1.train.start_queue_runners(sess=session) == []
    assert session.close() is True
    with pytest.raises(RuntimeError, match='closed Session'):
      raw.run(step)


def _mount_namespace_reason(seed_fifo):
  """Why this machine cannot give a process its own /dev/urandom, or None."""
  if os.geteuid() != 0:
    return 'not root'
  if shutil.which('unshare') is None or shutil.which('mount') is None:
    return 'no unshare or mount command'
  probe = subprocess.run(['unshare', '-m', 'mount', '--bind', seed_fifo, '/dev/urandom'],
                         capture_output=True, text=True, timeout=30)
  if probe.returncode != 0:
    return 'unshare -m mount --bind failed: %s' % (probe.stderr.strip() or probe.returncode)
  return None


@pytest.mark.cluster
def test_a_run_tensorflow_refuses_as_a_repeated_request_id_runs_again(tmp_path):
  seed_fifo = str(tmp_path / 'urandom')
  os.mkfifo(seed_fifo)
  reason = _mount_namespace_reason(seed_fifo)
  if reason:
    pytest.skip('a mount namespace is needed to control the request-id seeds: %s' % reason)
  env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL='2')
  result = subprocess.run(
      ['unshare', '-m', 'sh', '-c',
       'mount --bind "$1" /dev/urandom && exec "$2" -m tests.deployment.repeated_request_main '
       '"$1"', 'sh', seed_fifo, sys.executable],
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  cases = {c['case']: c for c in (json.loads(line) for line in result.stdout.splitlines()
                                  if line.startswith('{'))}
  # TensorFlow's own refusal, as a plain session meets it: recognized, not a lost peer.
  raw = cases['raw']
  assert (raw['first'], raw['error'], raw['duplicate']) == (1, 'AbortedError', True), raw
  assert 'The same RunGraph (Worker) request was received twice' in raw['refused_line'][0]
  # Refused once, then new ids: the step ran in the same session, no recovery.
  assert cases['retried'] == {'case': 'retried', 'value': 2, 'duplicate_requests': 1,
                              'recovering': False}
  # The same through a callable of `make_callable`, as a queue runner enqueues.
  assert cases['retried_callable'] == {'case': 'retried_callable', 'value': 3,
                                       'duplicate_requests': 1, 'recovering': False}
  # Refused every time: after request_ids.RETRIES runs again, a lost peer.
  assert cases['refused'] == {'case': 'refused', 'error': 'AbortedError',
                              'duplicate_requests': request_ids.RETRIES,
                              'recovering': True}
  assert ('a run was refused as a repeated request id (The same RunGraph (Worker) request '
          'was received twice); running it again in the same session (1 of 3)') in result.stderr
  assert 'running it again in the same session (3 of 3)' in result.stderr
  # The loops that poll for the whole job poll on: the ps ends on the chief's word, and
  # the chief's membership log still takes a worker's announcement.
  assert cases['poll_loops'] == {'case': 'poll_loops', 'ps_exit': 0, 'members': [0],
                                 'membership_log_running': True}


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
