"""The local launcher (deployment/launch.py) with real processes.

Restart policies, backoff limit, outcomes and signals run a tiny program that
exits with the codes it is told (tests/deployment/launch_task_main.py); the
slow tests train the shapes SSD with chief + worker + ps, from flags and from
a TFJob manifest written by deployment.tfjob, to num_steps, and run
trainer.model_main with an evaluator.
"""

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from deployment import launch
from deployment import replicas
from tests import cluster_util
from tests.deployment import launch_task_main

pytestmark = pytest.mark.cluster

_PROGRAM = [sys.executable, '-m', 'tests.deployment.launch_task_main']
# Tasks that finish first wait until these two can take SIGTERM.
_CHIEF_AND_PS_WAITING = 'chief:0=waiting;ps:0=waiting'
_PREFIX_RE = re.compile(r'^\[(launch|progress|chief:0|worker:\d|ps:\d|evaluator:0)\] ')


def _specs(record_dir, policy='ExitCode', workers=1, ps=1, chief_args=(), **task_args):
  """chief + workers + ps running the tiny program; chief_args only for the chief."""
  args = ['--record_dir=%s' % record_dir] + ['--%s=%s' % kv for kv in task_args.items()]
  specs = [replicas.ReplicaSpec('chief', 1, _PROGRAM + args + list(chief_args),
                                restart_policy=policy),
           replicas.ReplicaSpec('worker', workers, _PROGRAM + args, restart_policy=policy)]
  if ps:
    specs.append(replicas.ReplicaSpec('ps', ps, _PROGRAM + args, restart_policy=policy))
  return specs


def _run(specs, **kwargs):
  """Runs the job in this process; returns (exit code, launcher, merged log)."""
  out = io.StringIO()
  options = dict(backoff_secs=0.05, max_backoff_secs=0.2, grace_secs=20,
                 finish_timeout_secs=60, cwd=cluster_util.REPO_ROOT,
                 env={'CUDA_VISIBLE_DEVICES': ''})
  options.update(kwargs)
  launcher = launch.Launcher(specs, out=out, **options)
  code = launcher.run(handle_signals=False)
  return code, launcher, out.getvalue()


def _records(record_dir, task):
  path = os.path.join(str(record_dir), '%s.txt' % task.replace(':', '-'))
  with open(path) as f:
    return f.read().split('\n')[:-1]


def test_retryable_exit_is_restarted_with_exponential_backoff(tmp_path):
  specs = _specs(tmp_path, exit_codes='worker:0=129,129', chief_args=[
      '--wait_for_exits=worker:0=3'])
  code, launcher, log = _run(specs, log_dir=str(tmp_path / 'logs'))
  assert code == 0, log
  assert _records(tmp_path, 'worker:0') == ['start', 'exit 129'] * 2 + ['start', 'exit 0']
  # --task_log_dir: each task's raw output, every attempt under its own header.
  with open(str(tmp_path / 'logs' / 'worker-0.log')) as f:
    raw = f.read()
  assert raw.count('===== attempt ') == 3 and 'attempt 3 of worker:0' in raw
  assert not any(line.startswith('[') for line in raw.splitlines())
  assert launcher.restarts == 2
  assert ('[launch] worker:0 exited with code 129; restart policy ExitCode: restarting in '
          '0.1s (restart 2 of at most 6 in the job)') in log, log
  assert '[launch] chief:0 exited with code 0: the job succeeded' in log
  assert _records(tmp_path, 'ps:0') == ['start', 'exit 0']


def test_merged_log_prefixes_progress_and_tf_config(tmp_path):
  specs = _specs(tmp_path, workers=2)
  code, launcher, log = _run(specs)
  assert code == 0, log
  lines = log.splitlines()
  assert all(_PREFIX_RE.match(line) for line in lines), log
  # Every task's own lines carry its prefix.
  for task in ('chief:0', 'worker:0', 'worker:1', 'ps:0'):
    assert '[%s] attempt 1 of %s' % (task, task) in lines
  # The chief's step lines (and only the chief's) are repeated as progress.
  assert [line for line in lines if line.startswith('[progress]')] == [
      '[progress] global step 1, loss = 1.0, 1.00 steps/sec',
      '[progress] global step 2, loss = 0.5, 1.00 steps/sec']
  assert launcher.progress == [line[len('[progress] '):] for line in lines
                               if line.startswith('[progress]')]
  tf_configs = {}
  for line in lines:
    match = re.match(r'^\[(\w+:\d)\] TF_CONFIG=(.*)$', line)
    if match:
      tf_configs[match.group(1)] = json.loads(match.group(2))
  cluster = launcher.cluster
  assert sorted(cluster) == ['chief', 'ps', 'worker'] and len(cluster['worker']) == 2
  for task, tf_config in tf_configs.items():
    task_type, index = task.split(':')
    assert tf_config == {'cluster': cluster, 'task': {'type': task_type, 'index': int(index)},
                         'environment': 'cloud'}
  assert sorted(tf_configs) == ['chief:0', 'ps:0', 'worker:0', 'worker:1']
  addresses = [a for job in cluster.values() for a in job]
  assert len(set(addresses)) == 4 and all(a.startswith('127.0.0.1:') for a in addresses)


def test_permanent_exit_fails_the_job_and_stops_the_others(tmp_path):
  specs = _specs(tmp_path, exit_codes='worker:0=3', until_sigterm='chief:0,ps:0',
                 wait_for=_CHIEF_AND_PS_WAITING)
  code, launcher, log = _run(specs)
  assert code == 3, log
  assert _records(tmp_path, 'worker:0') == ['start', 'exit 3']
  assert launcher.restarts == 0
  assert ('worker:0 exited with code 3, which restart policy ExitCode does not restart: '
          'the job fails') in log
  for task in ('chief:0', 'ps:0'):
    assert _records(tmp_path, task) == ['start', 'waiting', 'sigterm'], log


def test_a_failing_evaluator_restarts_alone_and_never_fails_the_job(tmp_path):
  args = ['--record_dir=%s' % tmp_path]
  specs = _specs(tmp_path, exit_codes='evaluator:0=1,1,1',
                 chief_args=['--wait_for_exits=evaluator:0=3', '--after_wait_secs=2']) + [
      replicas.ReplicaSpec('evaluator', 1, _PROGRAM + args + ['--exit_codes=evaluator:0=1,1,1'],
                           restart_policy='OnFailure')]
  code, launcher, log = _run(specs, backoff_limit=2)
  assert code == 0, log
  # Two restarts on its own budget, then it is let go; the job's budget is untouched.
  assert _records(tmp_path, 'evaluator:0') == ['start', 'exit 1'] * 3, log
  assert launcher.restarts == 0
  assert '(restart 2 of at most 2 of this task)' in log
  assert ('evaluator:0 exited with code 1 and is not restarted (policy OnFailure, 2 '
          'restart(s) done): training goes on without it') in log
  assert '[launch] chief:0 exited with code 0: the job succeeded' in log


def test_backoff_limit_counts_restarts_across_the_job(tmp_path):
  specs = _specs(tmp_path, workers=2, exit_codes='worker:0=129,129;worker:1=130,130,130',
                 until_sigterm='chief:0,ps:0', wait_for=_CHIEF_AND_PS_WAITING)
  code, launcher, log = _run(specs, backoff_limit=3)
  # Three restarts in all; the fourth retryable exit fails the job with its code.
  assert code in (129, 130), log
  assert launcher.restarts == 3
  retryable_exits = re.findall(r'^\[launch\] worker:\d exited with code 1(29|30); ', log, re.M)
  assert len(retryable_exits) == 4, log
  assert len(re.findall(r'restarting in', log)) == 3, log
  assert 'backoff limit: the job fails' in log


def test_never_does_not_restart(tmp_path):
  specs = _specs(tmp_path, policy='Never', exit_codes='worker:0=129',
                 until_sigterm='chief:0,ps:0', wait_for=_CHIEF_AND_PS_WAITING)
  code, launcher, log = _run(specs)
  assert code == 129, log
  assert _records(tmp_path, 'worker:0') == ['start', 'exit 129']
  assert launcher.restarts == 0


def test_on_failure_restarts_permanent_codes_too(tmp_path):
  specs = _specs(tmp_path, policy='OnFailure', exit_codes='worker:0=3,1',
                 chief_args=['--wait_for_exits=worker:0=3'])
  code, launcher, log = _run(specs)
  assert code == 0, log
  assert _records(tmp_path, 'worker:0') == [
      'start', 'exit 3', 'start', 'exit 1', 'start', 'exit 0']
  assert launcher.restarts == 2


def test_always_restarts_after_success_until_the_backoff_limit(tmp_path):
  specs = _specs(tmp_path, policy='Always', ps=0, chief_args=['--wait_for_exits=worker:0=3'])
  code, launcher, log = _run(specs, backoff_limit=2)
  assert code == 0, log
  assert _records(tmp_path, 'worker:0') == ['start', 'exit 0'] * 3
  assert launcher.restarts == 2
  assert len(re.findall(r'^\[launch\] started worker:0', log, re.M)) == 3, log


def test_preempted_task_is_not_restarted_and_the_job_reports_143(tmp_path):
  specs = _specs(tmp_path, exit_codes='worker:0=143', until_sigterm='chief:0,ps:0',
                 wait_for=_CHIEF_AND_PS_WAITING)
  code, _, log = _run(specs)
  assert code == 143, log
  assert _records(tmp_path, 'worker:0') == ['start', 'exit 143']


def test_tasks_ignoring_sigterm_are_killed_after_the_grace_period(tmp_path):
  specs = _specs(tmp_path, exit_codes='chief:0=3', ignore_sigterm='worker:0,ps:0',
                 wait_for='worker:0=ignoring;ps:0=ignoring')
  code, launcher, log = _run(specs, grace_secs=1)
  assert code == 3, log
  for task in ('worker:0', 'ps:0'):
    assert '[%s] %s ignoring SIGTERM' % (task, task) in log
    assert '[launch] %s still running 1s after SIGTERM: SIGKILL' % task in log
    assert (task, 128 + 9) in launcher.exits


def test_a_second_stop_request_kills_at_once(tmp_path):
  specs = _specs(tmp_path, ignore_sigterm='chief:0,worker:0,ps:0')
  launcher = launch.Launcher(specs, grace_secs=60, out=io.StringIO(),
                             cwd=cluster_util.REPO_ROOT, env={'CUDA_VISIBLE_DEVICES': ''})

  def stop_twice():
    for task in ('chief:0', 'worker:0', 'ps:0'):
      launch_task_main._wait_for_lines(str(tmp_path), task, 1, 'ignoring')
    launcher.request_stop()
    while 'SIGKILL after 60s' not in launcher_output():
      time.sleep(0.05)
    launcher.request_stop()

  def launcher_output():
    return launcher._out.getvalue()  # pylint: disable=protected-access

  stopper = threading.Thread(target=stop_twice, daemon=True)
  stopper.start()
  code = launcher.run(handle_signals=False)
  stopper.join(timeout=60)
  log = launcher_output()
  assert code == 143, log
  assert '[launch] second stop request: SIGKILL now' in log
  for task in ('chief:0', 'worker:0', 'ps:0'):
    assert (task, 128 + 9) in launcher.exits, log


def test_after_success_lingering_tasks_are_stopped(tmp_path):
  specs = _specs(tmp_path, until_sigterm='ps:0', wait_for='ps:0=waiting')
  code, _, log = _run(specs, finish_timeout_secs=1)
  assert code == 0, log
  assert _records(tmp_path, 'ps:0') == ['start', 'waiting', 'sigterm']
  assert 'tasks still running 1s after the job succeeded: ps:0; stopping them' in log


def test_a_command_that_cannot_start_fails_the_job_with_127(tmp_path):
  specs = _specs(tmp_path, workers=2, until_sigterm='chief:0,ps:0')
  specs[1] = specs[1]._replace(command=[str(tmp_path / 'no-such-program')])
  code, launcher, log = _run(specs)
  assert code == 127, log
  assert re.search(r'cannot start worker:0: .*no-such-program.*: the job fails', log), log
  assert ('worker:0', 127) in launcher.exits
  assert '[launch] started worker:1' not in log  # nothing more is started


def test_evaluator_command_follows_the_program():
  train_args = ['--pipeline_config_path=p.config', '--train_dir', '/tmp/t', '--alsologtostderr']
  assert replicas.evaluator_command('trainer.train', train_args) == [
      sys.executable, '-m', 'trainer.eval', '--pipeline_config_path=p.config',
      '--checkpoint_dir=/tmp/t', '--eval_dir=/tmp/t/eval']
  main_args = ['--pipeline_config_path=p.config', '--model_dir=/tmp/m']
  assert replicas.evaluator_command('trainer.model_main', main_args) == [
      sys.executable, '-m', 'trainer.model_main'] + main_args
  with pytest.raises(ValueError, match='needs --train_dir'):
    replicas.evaluator_command('trainer.train', ['--pipeline_config_path=p.config'])
  assert replicas.local_command(['python3', '-m', 'x']) == [sys.executable, '-m', 'x']
  assert replicas.local_command(['/usr/bin/env', 'python']) == ['/usr/bin/env', 'python']


def test_netns_puts_every_task_on_its_own_host(tmp_path, netns_network):
  specs = _specs(tmp_path, workers=2, chief_args=['--wait_for_exits=worker:1=2'],
                 exit_codes='worker:1=129')
  specs.append(replicas.ReplicaSpec('evaluator', 1, specs[0].command[:4]))
  network = netns_network(replicas.netns_hosts(specs))
  code, launcher, log = _run(specs, network=network)
  assert code == 0, log
  cluster = launcher.cluster
  assert cluster == {
      'chief': ['%s:2222' % network.address('chief0')],
      'worker': ['%s:2222' % network.address('worker%d' % i) for i in (0, 1)],
      'ps': ['%s:2222' % network.address('ps0')],
      'evaluator': ['%s:2222' % network.address('evaluator0')]}
  assert all(a.startswith('10.213.') for job in cluster.values() for a in job)
  namespaces = dict(re.findall(r'^\[(\w+:\d)\] network namespace (\S+)$', log, re.M))
  assert sorted(namespaces) == ['chief:0', 'evaluator:0', 'ps:0', 'worker:0', 'worker:1'], log
  # Five tasks, five network stacks, none of them this process's.
  assert len(set(namespaces.values())) == 5
  assert os.readlink('/proc/self/ns/net') not in namespaces.values()
  # A restarted task comes back on its own host.
  assert launcher.restarts == 1 and _records(tmp_path, 'worker:1') == [
      'start', 'exit 129', 'start', 'exit 0']
  assert len(set(re.findall(r'^\[worker:1\] network namespace (\S+)$', log, re.M))) == 1


def _start_cli(tmp_path, args, name='launch'):
  """Starts `python -m deployment.launch args` with its output in a file."""
  log_path = str(tmp_path / ('%s.out' % name))
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PYTHONPATH=cluster_util.REPO_ROOT)
  env.pop('TF_CONFIG', None)
  with open(log_path, 'wb') as log:
    process = subprocess.Popen([sys.executable, '-m', 'deployment.launch'] + args,
                               cwd=cluster_util.REPO_ROOT, env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
  return process, log_path


def _read(path):
  with open(path, encoding='utf-8', errors='replace') as f:
    return f.read()


def _finish(process, log_path, timeout):
  try:
    return process.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    raise AssertionError('launcher still running after %ss\n%s' % (timeout, _read(log_path)))


def test_sigterm_to_the_launcher_reaches_every_task_and_exits_143(tmp_path):
  process, log_path = _start_cli(tmp_path, [
      '--workers=1', '--ps=1', '--module=tests.deployment.launch_task_main', '--',
      '--record_dir=%s' % tmp_path, '--until_sigterm=chief:0,worker:0,ps:0'])
  deadline = time.time() + 120
  waiting = ['[%s] %s waiting for SIGTERM' % (t, t) for t in ('chief:0', 'worker:0', 'ps:0')]
  while not all(w in _read(log_path) for w in waiting):
    if process.poll() is not None or time.time() > deadline:
      _finish(process, log_path, 1)
      raise AssertionError('tasks did not start\n%s' % _read(log_path))
    time.sleep(0.1)
  process.send_signal(signal.SIGTERM)
  assert _finish(process, log_path, 60) == 143, _read(log_path)
  for task in ('chief:0', 'worker:0', 'ps:0'):
    assert _records(tmp_path, task) == ['start', 'waiting', 'sigterm']
  log = _read(log_path)
  assert '[launch] got SIGTERM: sending SIGTERM to every task' in log
  assert '[launch] job finished with exit code 143' in log


@pytest.mark.parametrize('args, message', [
    (['--workers=-1'], '--workers must be >= 0, got -1'),
    (['--nochief', '--workers=0'], '--nochief needs --workers >= 1'),
    (['--restart_policy=Sometimes'], "'Sometimes' for \\w+ is not one of"),
    (['--replica_restart_policy=trainer=Never'], "'trainer=Never' is not TYPE=POLICY"),
    (['--evaluator'], '--evaluator with --module=trainer.train needs --train_dir'),
    (['--tfjob=/nonexistent/job.yaml'], '--tfjob: .*nonexistent/job.yaml'),
])
def test_bad_flags_are_named(tmp_path, args, message):
  process, log_path = _start_cli(tmp_path, args)
  assert _finish(process, log_path, 120) == 1, _read(log_path)
  assert re.search(message, _read(log_path)), _read(log_path)


_MANIFEST = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: tiny, namespace: ml}
spec:
  runPolicy: {backoffLimit: 1}
  tfReplicaSpecs:
%s
"""
_REPLICA = """\
    %(type)s:
      replicas: %(replicas)d
      restartPolicy: ExitCode
      template:
        spec:
          containers:
          - name: tensorflow
            image: unused
            command: [python, -m, tests.deployment.launch_task_main]
            args: [--record_dir=%(dir)s, --exit_codes=worker:1=129;worker:0=129,
                   --until_sigterm=chief:0;ps:0;evaluator:0,
                   --wait_for=evaluator:0=waiting]
            env: [{name: SLIMTRAIN_TEST_VALUE, value: "7"}]
            ports: [{name: tfjob-port, containerPort: 2222}]
"""


def test_tfjob_manifest_runs_with_operator_tf_config_and_backoff_limit(tmp_path):
  manifest = _MANIFEST % ''.join(_REPLICA % {'type': t, 'replicas': n, 'dir': tmp_path}
                                 for t, n in (('Chief', 1), ('Worker', 2), ('PS', 1),
                                              ('Evaluator', 1)))
  path = tmp_path / 'job.yaml'
  path.write_text(manifest)
  process, log_path = _start_cli(tmp_path, ['--tfjob=%s' % path, '--backoff_secs=0.05'])
  code = _finish(process, log_path, 120)
  log = _read(log_path)
  # backoffLimit 1 from the manifest: one worker is restarted, the other fails the job.
  # (The workers fail only once the evaluator, started last, has printed its TF_CONFIG.)
  assert code == 129, log
  assert 'reached' not in log and 'backoff limit: the job fails' in log
  assert '[launch] TFJob ml/tiny from %s' % path in log
  assert re.search(r'\[launch\] service tiny-worker-1\.ml\.svc:2222 -> 127\.0\.0\.1:\d+', log)
  configs = {m.group(1): json.loads(m.group(2))
             for m in re.finditer(r'^\[(\w+:\d)\] TF_CONFIG=(.*)$', log, re.M)}
  cluster = configs['chief:0']['cluster']
  # The operator's shape: every replica type, the evaluator included, in every pod's cluster.
  assert sorted(cluster) == ['chief', 'evaluator', 'ps', 'worker']
  assert len(cluster['worker']) == 2 and len(cluster['evaluator']) == 1
  assert configs['evaluator:0'] == {'cluster': cluster, 'environment': 'cloud',
                                    'task': {'type': 'evaluator', 'index': 0}}
  assert configs['ps:0']['task'] == {'type': 'ps', 'index': 0}


# ----------------------------------------------------------------------------
# The shapes SSD, chief + worker + ps, to num_steps.

_NUM_STEPS = 8


@pytest.fixture(scope='module')
def ssd_config(tmp_path_factory):
  """A shrunk ssd_shapes.config (sync replicas: the final step is exact) on tiny data."""
  from core import config_util  # pylint: disable=import-outside-toplevel
  from tests.export import train_util  # pylint: disable=import-outside-toplevel
  from tools import create_shapes_tf_record  # pylint: disable=import-outside-toplevel
  directory = tmp_path_factory.mktemp('ssd')
  data = create_shapes_tf_record.create_shapes_dataset(
      str(directory / 'data'), num_train=8, num_val=2, height=64, width=64, num_shards=1)
  configs = train_util.ssd_configs(data, num_steps=_NUM_STEPS, batch_size=2)
  train_config = configs['train_config']
  train_config.sync_replicas = True
  train_config.replicas_to_aggregate = 2
  train_config.log_every_n_steps = 2
  configs['deploy_config'].num_clones = 1
  configs['deploy_config'].startup_timeout_secs = 240
  configs['deploy_config'].chief_timeout_secs = 240
  pipeline = config_util.create_pipeline_proto_from_configs(configs)
  return config_util.save_pipeline_config(pipeline, str(directory))


def _checkpoint_step(train_dir):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  path = tf.train.latest_checkpoint(train_dir)
  assert path, os.listdir(train_dir)
  return int(tf.train.load_variable(path, 'global_step'))


def _assert_trained(code, log_path, train_dir):
  log = _read(log_path)
  assert code == 0, log[-20000:]
  assert _checkpoint_step(train_dir) == _NUM_STEPS, log[-20000:]
  assert re.search(r'^\[progress\] global step \d+, loss = ', log, re.M), log[-20000:]
  assert '[launch] chief:0 exited with code 0: the job succeeded' in log
  for task in ('chief:0', 'worker:0', 'ps:0'):
    assert re.search(r'^\[%s\] ' % task, log, re.M), (task, log[-20000:])


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['tfjob', 'jobset'])
def test_shapes_ssd_from_a_generated_manifest_with_its_evaluator(tmp_path, ssd_config, kind):
  # The writer's default job (chief, worker, ps and the evaluator) for either engine, run
  # as its pods would be: the worked examples of docs/kubernetes.md, on a local claim.
  config_path = _evaluate_every_checkpoint(ssd_config, tmp_path)
  train_dir = str(tmp_path / 'train')
  manifest = str(tmp_path / 'job.yaml')
  env = dict(os.environ, PYTHONPATH=cluster_util.REPO_ROOT)
  subprocess.run([sys.executable, '-m', 'deployment.tfjob', '--kind=%s' % kind,
                  '--job_name=shapes', '--image=unused', '--pipeline_config_path=%s' % config_path,
                  '--train_dir=%s' % train_dir, '--pvc=scratch', '--mount_path=%s' % tmp_path,
                  '--workers=1', '--ps=1', '--output=%s' % manifest],
                 cwd=cluster_util.REPO_ROOT, env=env, check=True, timeout=120)
  process, log_path = _start_cli(tmp_path, ['--%s=%s' % (kind, manifest), '--grace_secs=10',
                                            '--finish_timeout_secs=240'])
  _assert_trained(_finish(process, log_path, 590), log_path, train_dir)
  log = _read(log_path)
  assert re.search(r'\[launch\] (service|pod) shapes-ps-0[.-]\S+:2222 -> 127\.0\.0\.1:', log), (
      log[-20000:])
  _assert_evaluated_to_the_end(log)


def _evaluate_every_checkpoint(ssd_config, tmp_path):
  """A copy of the shapes config whose evaluator evaluates every checkpoint to the final one."""
  from core import config_util  # pylint: disable=import-outside-toplevel
  configs = config_util.get_configs_from_pipeline_file(ssd_config)
  configs['eval_config'].max_evals = 0
  configs['eval_config'].eval_interval_secs = 1
  return config_util.save_pipeline_config(
      config_util.create_pipeline_proto_from_configs(configs), str(tmp_path / 'config'))


def _assert_evaluated_to_the_end(log):
  """The evaluator evaluated up to the final checkpoint and exited 0."""
  assert re.search(r'^\[evaluator:0\] .*evaluations: \d+, last step %d, stopped: '
                   r'final_checkpoint' % _NUM_STEPS, log, re.M), log[-20000:]
  assert '[launch] evaluator:0 exited with code 0' in log
  assert 'trainer.eval: error' not in log


@pytest.mark.slow
def test_readme_evaluator_command_on_a_fresh_train_dir(tmp_path, ssd_config):
  # README's `deployment.launch --chief --workers=1 --ps=1 --evaluator -- ...` with a
  # train_dir nobody created: every task starts at once, as the pods of a TFJob do.
  # The job from flags alone (without --evaluator) takes no path this one does not.
  # Evaluate every checkpoint up to the final one (the shapes config stops after one).
  config_path = _evaluate_every_checkpoint(ssd_config, tmp_path)
  train_dir = str(tmp_path / 'train')
  process, log_path = _start_cli(tmp_path, [
      '--chief', '--workers=1', '--ps=1', '--evaluator', '--grace_secs=10',
      '--finish_timeout_secs=240', '--',
      '--pipeline_config_path=%s' % config_path, '--train_dir=%s' % train_dir,
      '--alsologtostderr'])
  code = _finish(process, log_path, 590)
  log = _read(log_path)
  _assert_trained(code, log_path, train_dir)
  # The evaluator is in the cluster of every task (the operator's TF_CONFIG) ...
  cluster = re.search(r'^\[launch\] cluster (.*)$', log, re.M).group(1)
  assert "'evaluator': ['127.0.0.1:" in cluster, cluster
  # ... waited for the train_dir (trainer.eval itself creates train_dir/eval, its eval_dir,
  # before it looks for checkpoints), evaluated up to the final checkpoint and exited 0.
  assert re.search(r'^\[evaluator:0\] .*checkpoint_dir %s (does not exist|holds no '
                   r'checkpoint) yet: waiting up to 3600 s for training to write its first '
                   r'checkpoint there' % re.escape(train_dir), log, re.M), log[-20000:]
  _assert_evaluated_to_the_end(log)


@pytest.mark.slow
def test_model_main_with_an_evaluator_from_flags(tmp_path, ssd_config):
  model_dir = str(tmp_path / 'model')
  process, log_path = _start_cli(tmp_path, [
      '--module=trainer.model_main', '--workers=1', '--ps=1', '--evaluator',
      '--grace_secs=10', '--finish_timeout_secs=240', '--',
      '--pipeline_config_path=%s' % ssd_config, '--model_dir=%s' % model_dir,
      '--alsologtostderr'])
  code = _finish(process, log_path, 590)
  log = _read(log_path)
  assert code == 0, log[-20000:]
  # model_main (the Estimator path) trains asynchronously with W = 2 training
  # tasks, each stopped by tf's StopAtStepHook: num_steps .. num_steps + 2W - 1 (README).
  final_step = _checkpoint_step(model_dir)
  assert _NUM_STEPS <= final_step <= _NUM_STEPS + 3, final_step
  # The evaluator (model_main's evaluator role) evaluated the final checkpoint and exited 0.
  assert re.search(r'^\[evaluator:0\] .*Saving dict for global step %d:' % final_step, log,
                   re.M), log[-20000:]
  assert '[launch] evaluator:0 exited with code 0' in log
  assert re.search(r'^\[progress\] loss = \S+, step = \d+', log, re.M), log[-20000:]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
