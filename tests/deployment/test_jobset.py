"""JobSet manifests (deployment/jobset.py): written field by field, read back, run locally."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest
import yaml

from deployment import jobset
from deployment import k8s_pods
from deployment import tfjob
from tests import cluster_util

_CONFIG = '/app/configs/ssd_shapes.config'
_TINY = ['python', '-m', 'tests.deployment.launch_task_main']


def _options(**kwargs):
  return k8s_pods.job_options(kwargs.pop('job_name', 'shapes'), 'img', _CONFIG,
                              kwargs.pop('output_dir', 'gs://bucket/train'), **kwargs)


def _rjobs(job):
  return {r['name']: r for r in job['spec']['replicatedJobs']}


def test_jobset_field_by_field():
  policy, job = tfjob.manifests(_options(namespace='ml', workers=2, backoff_limit=4,
                                         max_restarts=2), 'jobset')
  assert (job['apiVersion'], job['kind']) == ('jobset.x-k8s.io/v1alpha2', 'JobSet')
  assert job['metadata'] == {'name': 'shapes', 'namespace': 'ml'}
  spec = job['spec']
  assert spec['network'] == {'enableDNSHostnames': True, 'subdomain': 'shapes',
                             'publishNotReadyAddresses': True}
  # Done when the chief is and the evaluator has evaluated the last checkpoint.
  assert spec['successPolicy'] == {'operator': 'All',
                                   'targetReplicatedJobs': ['chief', 'evaluator']}
  assert spec['failurePolicy'] == {'maxRestarts': 2, 'rules': [
      {'name': 'evaluatorRestartsAlone', 'action': 'RestartJobAndIgnoreMaxRestarts',
       'onJobFailureReasons': ['BackoffLimitExceeded'], 'targetReplicatedJobs': ['evaluator']},
      {'name': 'permanentFailure', 'action': 'FailJobSet',
       'onJobFailureReasons': ['PodFailurePolicy', 'DeadlineExceeded']}]}
  rjobs = _rjobs(job)
  assert list(rjobs) == ['chief', 'worker', 'ps', 'evaluator']
  for name, count in (('chief', 1), ('worker', 2), ('ps', 1), ('evaluator', 1)):
    rjob = rjobs[name]
    assert rjob['replicas'] == 1
    job_spec = rjob['template']['spec']
    assert (job_spec['completionMode'], job_spec['completions'], job_spec['parallelism'],
            job_spec['backoffLimit'], job_spec['activeDeadlineSeconds']) == (
                'Indexed', count, count, 4, 7 * 24 * 3600)
    rules = job_spec['podFailurePolicy']['rules']
    assert rules[0] == {'action': 'Ignore',
                        'onPodConditions': [{'type': 'DisruptionTarget', 'status': 'True'}]}
    if name == 'evaluator':
      # Its exit codes all count against its own backoffLimit: it never fails the job.
      assert len(rules) == 1
    else:
      assert rules[1] == {'action': 'FailJob',
                          'onExitCodes': {'containerName': 'tensorflow', 'operator': 'In',
                                          'values': list(range(1, 128))}}
    pod = job_spec['template']['spec']
    assert pod['restartPolicy'] == 'Never'  # what podFailurePolicy requires
    env = pod['containers'][0]['env']
    assert env[0] == {'name': 'SLIMTRAIN_TASK_INDEX', 'valueFrom': {'fieldRef': {
        'fieldPath': "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
    assert env[1]['name'] == 'TF_CONFIG'
    assert '"task": {"index": $(SLIMTRAIN_TASK_INDEX), "type": "%s"}' % name in env[1]['value']
  assert rjobs['evaluator']['template']['spec']['template']['spec']['containers'][0][
      'command'] == ['python', '-m', 'trainer.eval']
  assert policy['spec']['podSelector'] == {
      'matchLabels': {'jobset.sigs.k8s.io/jobset-name': 'shapes'}}
  assert policy['metadata'] == {'name': 'shapes-grpc', 'namespace': 'ml'}


def test_each_pod_gets_its_tf_config_from_the_stable_pod_names():
  job = jobset.parse_jobset(tfjob.manifests(_options(namespace='ml', workers=2),
                                            'jobset')[1])
  cluster = {'chief': ['shapes-chief-0-0.shapes:2222'],
             'worker': ['shapes-worker-0-0.shapes:2222', 'shapes-worker-0-1.shapes:2222'],
             'ps': ['shapes-ps-0-0.shapes:2222'],
             # Listed as the TFJob operator lists it; training tasks leave it out.
             'evaluator': ['shapes-evaluator-0-0.shapes:2222']}
  assert job.addresses == cluster
  assert sorted(job.tf_configs) == ['chief:0', 'evaluator:0', 'ps:0', 'worker:0', 'worker:1']
  for task, text in job.tf_configs.items():
    replica_type, index = task.split(':')
    assert json.loads(text) == {'cluster': cluster, 'environment': 'cloud',
                                'task': {'type': replica_type, 'index': int(index)}}
  assert job.task_env['worker:1'] == {'SLIMTRAIN_TASK_INDEX': '1', 'JOB_COMPLETION_INDEX': '1'}
  assert (job.name, job.namespace, job.backoff_limit, job.port) == ('shapes', 'ml', 6, 2222)
  by_type = {s.replica_type: s for s in job.specs}
  assert by_type['worker'].replicas == 2 and by_type['worker'].restart_policy == 'ExitCode'
  # With the launcher's addresses, every pod's TF_CONFIG is the one its task gets.
  local = {t: ['127.0.0.1:%d' % (5000 + i + 10 * n) for i in range(len(a))]
           for n, (t, a) in enumerate(cluster.items())}
  jobset.check_tf_configs(job, local, 'job.yaml')
  # A pod whose TF_CONFIG names another task is caught.
  wrong = dict(job.tf_configs, **{'worker:1': job.tf_configs['worker:0']})
  with pytest.raises(ValueError, match='job.yaml: pod worker:1 gets TF_CONFIG'):
    jobset.check_tf_configs(job._replace(tf_configs=wrong), local, 'job.yaml')


def test_without_a_chief_the_workers_decide_success():
  job = tfjob.manifests(_options(chief=False, workers=2, evaluator=False), 'jobset')[1]
  assert job['spec']['successPolicy'] == {'operator': 'All', 'targetReplicatedJobs': ['worker']}
  assert list(_rjobs(job)) == ['worker', 'ps']


def test_restart_policies_map_onto_job_fields():
  on_failure = _rjobs(jobset.jobset_manifest(_options(restart_policy='OnFailure')))['worker']
  assert 'podFailurePolicy' not in on_failure['template']['spec']
  assert on_failure['template']['spec']['template']['spec']['restartPolicy'] == 'OnFailure'
  never = _rjobs(jobset.jobset_manifest(_options(restart_policy='Never')))['worker']
  assert never['template']['spec']['backoffLimit'] == 0
  with pytest.raises(ValueError, match='--restart_policy: value cannot be Always for a JobSet'):
    jobset.jobset_manifest(_options(restart_policy='Always'))


def test_jobset_platform_flags():
  job = jobset.jobset_manifest(_options(active_deadline_secs=3600, ttl_secs_after_finished=0,
                                        kueue_queue='team-a'))
  assert job['metadata']['labels'] == {'kueue.x-k8s.io/queue-name': 'team-a'}
  assert job['spec']['ttlSecondsAfterFinished'] == 0
  assert job['spec']['failurePolicy']['rules'][-1]['onJobFailureReasons'] == [
      'PodFailurePolicy', 'DeadlineExceeded']
  for rjob in job['spec']['replicatedJobs']:
    assert rjob['template']['spec']['activeDeadlineSeconds'] == 3600
  with pytest.raises(ValueError, match='--gang_scheduling: value is a TFJob field; .* '
                     '--kueue_queue'):
    jobset.jobset_manifest(_options(gang_scheduling=True, scheduler_name='volcano'))


def test_expansion_follows_kubernetes():
  env = {'A': 'x', 'B': '1'}
  assert jobset.expand('$(A)-$(B)', env) == 'x-1'
  assert jobset.expand('$$(A) $(C) $A', env) == '$(A) $(C) $A'
  container = {'env': [{'name': 'I', 'valueFrom': {'fieldRef': {
      'fieldPath': "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                       {'name': 'LATER', 'value': '$(EARLIER)'},
                       {'name': 'EARLIER', 'value': 'e'},
                       {'name': 'HOST', 'value': 'w-$(I).svc'},
                       {'name': 'S', 'valueFrom': {'secretKeyRef': {'name': 's', 'key': 'k'}}}]}
  # A value sees only the names before it; unknown references stay as written.
  assert jobset.pod_env(container, 3, 'job.yaml', 'c') == {
      'I': '3', 'LATER': '$(EARLIER)', 'EARLIER': 'e', 'HOST': 'w-3.svc',
      'JOB_COMPLETION_INDEX': '3'}


@pytest.mark.parametrize('edit, message', [
    (lambda m: m.update(apiVersion='jobset.x-k8s.io/v1alpha1'),
     'apiVersion must be jobset.x-k8s.io/v1alpha2'),
    (lambda m: m['spec'].update(replicatedJobs=[]), 'spec.replicatedJobs must list'),
    (lambda m: m['spec']['replicatedJobs'][0].update(name='trainer'),
     r'spec.replicatedJobs\[0\].name must name a role'),
    (lambda m: m['spec']['replicatedJobs'][1].update(replicas=2),
     r'spec.replicatedJobs\[1\].replicas must be 1'),
    (lambda m: m['spec']['replicatedJobs'][1]['template']['spec'].pop('completionMode'),
     r'replicatedJobs\[1\].template.spec.completionMode must be Indexed'),
    (lambda m: m['spec']['replicatedJobs'][1]['template']['spec'].update(parallelism=1),
     r'replicatedJobs\[1\].template.spec.parallelism must equal completions \(2\)'),
])
def test_bad_jobsets_name_the_key(edit, message):
  manifest = jobset.jobset_manifest(_options(workers=2))
  edit(manifest)
  with pytest.raises(ValueError, match=message):
    jobset.parse_jobset(manifest, source='job.yaml')


def test_file_must_hold_one_jobset(tmp_path):
  path = tmp_path / 'job.yaml'
  path.write_text(tfjob.manifest_text(_options(), 'tfjob'))
  with pytest.raises(ValueError, match='exactly one document of kind JobSet, found 0'):
    jobset.read_jobset(str(path))
  path.write_text(tfjob.manifest_text(_options(), 'jobset'))
  assert jobset.read_jobset(str(path)).name == 'shapes'



def test_the_evaluator_ends_with_training_and_never_fails_it():
  job = jobset.jobset_manifest(_options(program_args=['--num_train_steps=2000']))
  evaluator = _rjobs(job)['evaluator']['template']['spec']
  assert evaluator['template']['spec']['containers'][0]['args'][-1] == (
      '--num_train_steps=2000')
  # Only disruptions are ignored; exit 1 is counted against its own backoffLimit.
  assert evaluator['podFailurePolicy'] == {'rules': [
      {'action': 'Ignore', 'onPodConditions': [{'type': 'DisruptionTarget',
                                                'status': 'True'}]}]}
  rules = job['spec']['failurePolicy']['rules']
  assert rules[0] == {'name': 'evaluatorRestartsAlone',
                      'action': 'RestartJobAndIgnoreMaxRestarts',
                      'onJobFailureReasons': ['BackoffLimitExceeded'],
                      'targetReplicatedJobs': ['evaluator']}
  # For JobSet controllers before v0.12: no such action; a failure restarts the JobSet.
  old = jobset.jobset_manifest(_options(evaluator_restart='whole_job'))
  assert [r['name'] for r in old['spec']['failurePolicy']['rules']] == ['permanentFailure']
  assert old['spec']['successPolicy']['targetReplicatedJobs'] == ['chief', 'evaluator']
  # Without an evaluator nothing names it.
  bare = jobset.jobset_manifest(_options(evaluator=False))
  assert 'evaluator' not in json.dumps(bare['spec']['failurePolicy'])


def test_the_evaluator_learns_the_last_step():
  def evaluator_args(**kwargs):
    job = jobset.jobset_manifest(_options(**kwargs))
    return _rjobs(job)['evaluator']['template']['spec']['template']['spec'][
        'containers'][0]['args']
  assert not any('num_train_steps' in a for a in evaluator_args())  # unknown: left out
  assert evaluator_args(num_train_steps=300)[-1] == '--num_train_steps=300'
  # The writer's --num_train_steps goes to the training tasks too: all stop at one step.
  job = jobset.jobset_manifest(_options(num_train_steps=300))
  worker = _rjobs(job)['worker']['template']['spec']['template']['spec']['containers'][0]
  assert worker['args'][-1] == '--num_train_steps=300'
  # model_main's evaluator role takes the same flags as training.
  args = evaluator_args(program='trainer.model_main', output_dir='gs://b/model',
                        num_train_steps=300)
  assert args[-1] == '--num_train_steps=300' and '--model_dir=gs://b/model' in args


# ----------------------------------------------------------------------------
# Running generated JobSets with deployment.launch.

def _launch(tmp_path, manifests, *args, timeout=120, path=None):
  """Runs `python -m deployment.launch --jobset=<manifests> args`; returns (code, log).

  `manifests` (a list of dicts) is written to tmp_path/job.yaml unless `path` is given.
  """
  if path is None:
    path = tmp_path / 'job.yaml'
    path.write_text(yaml.safe_dump_all(manifests))
  log_path = tmp_path / 'launch.out'
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PYTHONPATH=cluster_util.REPO_ROOT)
  env.pop('TF_CONFIG', None)
  with open(str(log_path), 'wb') as log:
    process = subprocess.Popen(
        [sys.executable, '-m', 'deployment.launch', '--jobset=%s' % path] + list(args),
        cwd=cluster_util.REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
  try:
    code = process.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    raise AssertionError('launcher still running\n%s' % log_path.read_text())
  return code, log_path.read_text(errors='replace')


def _tiny_jobset(tmp_path, chief_args=(), **task_args):
  """A generated JobSet whose containers run the tiny task program instead of training."""
  manifests = tfjob.manifests(_options(workers=2, backoff_limit=2), 'jobset')
  for rjob in manifests[1]['spec']['replicatedJobs']:
    container = rjob['template']['spec']['template']['spec']['containers'][0]
    container['command'] = list(_TINY)
    container['env'].append({'name': 'RECORDS', 'value': str(tmp_path)})
    container['args'] = ['--record_dir=$(RECORDS)'] + ['--%s=%s' % kv for kv in
                                                       task_args.items()]
    if rjob['name'] == 'chief':
      container['args'] += list(chief_args)
  return manifests


@pytest.mark.cluster
def test_generated_jobset_runs_with_index_expansion_and_exit_code_policy(tmp_path):
  manifests = _tiny_jobset(tmp_path, chief_args=['--wait_for_exits=worker:1=2'],
                           exit_codes='worker:1=129')
  code, log = _launch(tmp_path, manifests, '--backoff_secs=0.05', '--finish_timeout_secs=30')
  assert code == 0, log
  assert '[launch] JobSet default/shapes from ' in log
  assert re.search(r'\[launch\] pod shapes-worker-0-1\.shapes:2222 -> 127\.0\.0\.1:\d+', log)
  # 129 is retryable under the podFailurePolicy: worker 1 ran again.
  assert '[launch] worker:1 exited with code 129; restart policy ExitCode' in log
  configs = {m.group(1): json.loads(m.group(2))
             for m in re.finditer(r'^\[(\w+:\d)\] TF_CONFIG=(.*)$', log, re.M)}
  assert configs['worker:1']['task'] == {'type': 'worker', 'index': 1}
  assert configs['evaluator:0']['task'] == {'type': 'evaluator', 'index': 0}
  assert sorted(configs['chief:0']['cluster']) == ['chief', 'evaluator', 'ps', 'worker']
  # $(RECORDS) in args came from the container's env.
  assert os.path.exists(str(tmp_path / 'worker-1.txt'))


@pytest.mark.cluster
def test_permanent_exit_code_fails_the_generated_jobset(tmp_path):
  manifests = _tiny_jobset(tmp_path, exit_codes='worker:0=3', until_sigterm='chief:0')
  code, log = _launch(tmp_path, manifests, '--backoff_secs=0.05', '--grace_secs=10')
  assert code == 3, log
  assert 'worker:0 exited with code 3, which restart policy ExitCode does not restart' in log


@pytest.mark.parametrize('args, message', [
    (['--tfjob=/nonexistent/a.yaml'], '--tfjob or --jobset, not both'),
    ([], '--jobset: .*nonexistent/job.yaml does not exist'),
])
def test_bad_jobset_flags_are_named(tmp_path, args, message):
  code, log = _launch(tmp_path, None, *args, path='/nonexistent/job.yaml')
  assert code == 1 and re.search(message, log), log


def test_a_tf_config_that_does_not_match_is_refused(tmp_path):
  manifests = _tiny_jobset(tmp_path)
  env = manifests[1]['spec']['replicatedJobs'][1]['template']['spec']['template']['spec'][
      'containers'][0]['env']
  env[1]['value'] = env[1]['value'].replace('$(SLIMTRAIN_TASK_INDEX)', '0')
  code, log = _launch(tmp_path, manifests)
  assert code == 1, log
  assert re.search(r'--jobset: .*job.yaml: pod worker:1 gets TF_CONFIG', log), log


# ----------------------------------------------------------------------------
# The shapes SSD from a generated JobSet, with an evaluator.

@pytest.mark.slow
@pytest.mark.cluster
def test_shapes_ssd_model_main_jobset_with_an_evaluator(tmp_path):
  from core import config_util  # pylint: disable=import-outside-toplevel
  from tests.export import train_util  # pylint: disable=import-outside-toplevel
  from tools import create_shapes_tf_record  # pylint: disable=import-outside-toplevel
  # A shrunk ssd_shapes.config on tiny data, 8 steps (as in test_launch's slow tests).
  data = create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path / 'data'), num_train=8, num_val=2, height=64, width=64, num_shards=1)
  configs = train_util.ssd_configs(data, num_steps=8, batch_size=2)
  configs['train_config'].log_every_n_steps = 2
  configs['deploy_config'].num_clones = 1
  configs['deploy_config'].startup_timeout_secs = 240
  configs['deploy_config'].chief_timeout_secs = 240
  ssd_config = config_util.save_pipeline_config(
      config_util.create_pipeline_proto_from_configs(configs), str(tmp_path))
  model_dir = str(tmp_path / 'model')
  options = k8s_pods.job_options(
      'shapes', 'unused', ssd_config, model_dir, program='trainer.model_main', chief=False,
      workers=1, ps=1, evaluator=True, pvc='scratch', mount_path=str(tmp_path))
  code, log = _launch(tmp_path, tfjob.manifests(options, 'jobset'), '--grace_secs=10',
                      '--finish_timeout_secs=240', timeout=590)
  assert code == 0, log[-20000:]
  # The evaluator (model_main's evaluator role) evaluated a checkpoint and exited 0.
  assert re.search(r'^\[evaluator:0\] .*Saving dict for global step \d+:', log,
                   re.M), log[-20000:]
  assert '[launch] evaluator:0 exited with code 0' in log
  assert '[launch] worker:0 exited with code 0: the job succeeded' in log


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
