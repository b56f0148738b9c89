"""The pods both manifest kinds share (deployment/k8s_pods.py): security, storage, GPUs, flags."""

import os
import subprocess
import sys

import pytest
import yaml

from builders import deploy_config_builder
from deployment import k8s_flags
from deployment import k8s_pods
from deployment import tfjob
from protos import pipeline_pb2
from tests import cluster_util

_CONFIG = '/app/configs/ssd_shapes.config'
_KINDS = ('tfjob', 'jobset')


def _options(**kwargs):
  return k8s_pods.job_options(kwargs.pop('job_name', 'shapes'), 'img', _CONFIG,
                              kwargs.pop('output_dir', 'gs://bucket/train'), **kwargs)


def _pod_specs(options, kind):
  """{role: PodSpec dict} of the job's manifest of `kind`."""
  documents = tfjob.manifests(options, kind)
  job = documents[1]
  if kind == 'tfjob':
    pods = {t.lower(): body['template']['spec']
            for t, body in job['spec']['tfReplicaSpecs'].items()}
    for document in documents[2:]:  # the evaluator's own Job
      pods['evaluator'] = document['spec']['template']['spec']
    return pods
  return {rjob['name']: rjob['template']['spec']['template']['spec']
          for rjob in job['spec']['replicatedJobs']}


# ----------------------------------------------------------------------------
# Pod Security Standards, "restricted" profile (kubernetes.io/docs/concepts/security/
# pod-security-standards), checked rule by rule on a PodSpec.

_BASELINE_CAPABILITIES = {'AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL',
                          'MKNOD', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP',
                          'SETUID', 'SYS_CHROOT'}
_RESTRICTED_VOLUMES = {'configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral',
                       'persistentVolumeClaim', 'projected', 'secret'}


def restricted_profile_violations(pod):
  """The rules of the restricted profile `pod` (a PodSpec dict) breaks, as strings."""
  bad = []
  pod_context = pod.get('securityContext', {})
  containers = (pod.get('containers', []) + pod.get('initContainers', []) +
                pod.get('ephemeralContainers', []))
  # Baseline rules.
  for key in ('hostNetwork', 'hostPID', 'hostIPC'):
    if pod.get(key):
      bad.append('host namespaces: %s' % key)
  if pod_context.get('windowsOptions', {}).get('hostProcess'):
    bad.append('hostProcess')
  for volume in pod.get('volumes', []):
    kinds = set(volume) - {'name'}
    if 'hostPath' in kinds:
      bad.append('hostPath volume %s' % volume['name'])
    if not kinds <= _RESTRICTED_VOLUMES:
      bad.append('volume type %s of %s' % (sorted(kinds), volume['name']))
  for key in ('sysctls',):
    if pod_context.get(key):
      bad.append('sysctls')
  if pod_context.get('seLinuxOptions', {}).get('user') or pod_context.get(
      'seLinuxOptions', {}).get('role'):
    bad.append('SELinux user/role')
  pod_seccomp = pod_context.get('seccompProfile', {}).get('type')
  pod_non_root = pod_context.get('runAsNonRoot')
  if pod_context.get('runAsUser') == 0:
    bad.append('pod runAsUser 0')
  for container in containers:
    name = container.get('name')
    context = container.get('securityContext', {})
    if context.get('privileged'):
      bad.append('%s: privileged' % name)
    if context.get('windowsOptions', {}).get('hostProcess'):
      bad.append('%s: hostProcess' % name)
    if any(port.get('hostPort') for port in container.get('ports', [])):
      bad.append('%s: hostPort' % name)
    if context.get('procMount', 'Default') != 'Default':
      bad.append('%s: procMount' % name)
    capabilities = context.get('capabilities', {})
    added = set(capabilities.get('add', []))
    if not added <= _BASELINE_CAPABILITIES:
      bad.append('%s: capabilities beyond baseline %s' % (name, sorted(added)))
    # Restricted rules.
    if context.get('allowPrivilegeEscalation') is not False:
      bad.append('%s: allowPrivilegeEscalation must be false' % name)
    if 'ALL' not in capabilities.get('drop', []):
      bad.append('%s: capabilities must drop ALL' % name)
    if not added <= {'NET_BIND_SERVICE'}:
      bad.append('%s: may add only NET_BIND_SERVICE' % name)
    non_root = context.get('runAsNonRoot', pod_non_root)
    if non_root is not True:
      bad.append('%s: runAsNonRoot must be true' % name)
    if context.get('runAsUser') == 0:
      bad.append('%s: runAsUser 0' % name)
    seccomp = context.get('seccompProfile', {}).get('type', pod_seccomp)
    if seccomp not in ('RuntimeDefault', 'Localhost'):
      bad.append('%s: seccompProfile must be RuntimeDefault or Localhost' % name)
  return bad


def test_the_rule_checker_catches_a_root_pod():
  pod = {'hostNetwork': True, 'volumes': [{'name': 'h', 'hostPath': {'path': '/'}}],
         'containers': [{'name': 'c', 'securityContext': {'privileged': True,
                                                          'capabilities': {'add': ['SYS_ADMIN']}}}]}
  bad = restricted_profile_violations(pod)
  for rule in ('host namespaces', 'hostPath', 'privileged', 'allowPrivilegeEscalation',
               'drop ALL', 'runAsNonRoot', 'seccompProfile', 'capabilities beyond'):
    assert any(rule in b for b in bad), (rule, bad)


@pytest.mark.parametrize('kind', _KINDS)
@pytest.mark.parametrize('kwargs', [
    {},
    dict(gpus_per_worker=2, resources={'evaluator': {'gpu': 1}}),
    dict(output_dir='/mnt/shared/train', pvc='claim', chief=False, workers=2),
    dict(program='trainer.model_main', output_dir='gs://bucket/model'),
])
def test_every_pod_passes_the_restricted_profile(kind, kwargs):
  options = _options(**kwargs)
  for role, pod in _pod_specs(options, kind).items():
    assert restricted_profile_violations(pod) == [], role
    assert pod['automountServiceAccountToken'] is False
    assert pod['securityContext']['runAsUser'] == 1000
  # A user id of one's own.
  pods = _pod_specs(options._replace(run_as_user=4242), kind)
  assert {p['securityContext']['runAsUser'] for p in pods.values()} == {4242}


# ----------------------------------------------------------------------------
# GPUs are used whatever the config says.

@pytest.mark.parametrize('kind', _KINDS)
def test_gpu_pods_pass_noclone_on_cpu_and_only_they_get_gpus(kind):
  pods = _pod_specs(_options(gpus_per_worker=2, cpu='4', memory='16Gi',
                             resources={'ps': {'cpu': '2', 'memory': '8Gi'}}), kind)
  for role in ('chief', 'worker'):
    container = pods[role]['containers'][0]
    assert container['args'][2:4] == ['--num_clones=2', '--noclone_on_cpu']
    assert container['resources'] == {'requests': {'cpu': '4', 'memory': '16Gi'},
                                      'limits': {'memory': '16Gi', 'nvidia.com/gpu': 2}}
  ps = pods['ps']['containers'][0]
  assert ps['resources'] == {'requests': {'cpu': '2', 'memory': '8Gi'},
                             'limits': {'memory': '8Gi'}}
  assert not {'--num_clones=2', '--noclone_on_cpu'} & set(ps['args'])
  assert 'nvidia.com/gpu' not in pods['evaluator']['containers'][0]['resources']['limits']


def test_the_placement_line_says_where_clones_run_and_why():
  config = pipeline_pb2.DeployConfig(num_clones=2, clone_on_cpu=True)
  # The flag the manifests pass wins over the config, and the line says so.
  settings = deploy_config_builder.build(config, num_clones=2, clone_on_cpu=False)
  assert not settings.clone_on_cpu
  assert deploy_config_builder.placement_text(settings, config, 2, False, num_gpus=2) == (
      'clones: 2 on GPU:0, GPU:1 (--noclone_on_cpu, overriding deploy_config.clone_on_cpu: '
      'true; --num_clones=2)')
  # The config alone, on a machine with GPUs: the line points at the idle GPUs.
  settings = deploy_config_builder.build(config)
  text = deploy_config_builder.placement_text(settings, config, num_gpus=2)
  assert text == ('clones: 2 on the CPU (deploy_config.clone_on_cpu: true; '
                  'deploy_config.num_clones: 2); 2 GPU(s) visible and unused: pass '
                  '--noclone_on_cpu to train on them')


def test_model_main_with_gpus_and_clone_on_cpu_is_refused():
  options = _options(program='trainer.model_main', gpus_per_worker=1)
  with pytest.raises(Exception, match='deploy_config.clone_on_cpu: true, so the GPUs would '
                     'sit idle'):
    tfjob.check_against_config(options, pipeline_pb2.DeployConfig(clone_on_cpu=True))
  tfjob.check_against_config(options, pipeline_pb2.DeployConfig(clone_on_cpu=False))


# ----------------------------------------------------------------------------
# Names, storage, platform options.

@pytest.mark.parametrize('kind, longest, what', [
    ('tfjob', 'evaluator-abcde', 'evaluator pod'),  # the evaluator's own Job's pod
    ('jobset', 'evaluator-0-0-abcde', 'pod'),
])
def test_the_longest_derived_name_fits_in_63(kind, longest, what):
  fits = 's' * (63 - len(longest) - 1)
  assert len(k8s_pods.derived_names(_options(job_name=fits), kind)[what]) == 63
  tfjob.manifests(_options(job_name=fits), kind)
  with pytest.raises(ValueError, match='makes the %s name' % what):
    tfjob.manifests(_options(job_name=fits + 's'), kind)


def test_more_workers_lengthen_the_names():
  names = k8s_pods.derived_names(_options(workers=12, evaluator=False), 'jobset')
  assert names == {'job': 'shapes-worker-0', 'pod hostname': 'shapes-worker-0-11',
                   'pod': 'shapes-worker-0-11-abcde'}


@pytest.mark.parametrize('kind', _KINDS)
def test_storage_volume_on_every_pod(kind):
  options = _options(output_dir='/data/run1/train', pvc='shared-rwx', mount_path='/data')
  for pod in _pod_specs(options, kind).values():
    assert pod['volumes'] == [{'name': 'shared',
                               'persistentVolumeClaim': {'claimName': 'shared-rwx'}}]
    assert pod['containers'][0]['volumeMounts'] == [{'name': 'shared', 'mountPath': '/data'}]
  # A remote train_dir needs no volume.
  for pod in _pod_specs(_options(output_dir='gs://bucket/train'), kind).values():
    assert 'volumes' not in pod and 'volumeMounts' not in pod['containers'][0]


@pytest.mark.parametrize('kind', _KINDS)
def test_termination_grace_has_a_margin_over_the_config(kind):
  pods = _pod_specs(_options(termination_grace_secs=120), kind)
  assert {p['terminationGracePeriodSeconds'] for p in pods.values()} == {135}
  pods = _pod_specs(_options(), kind)
  assert {p['terminationGracePeriodSeconds'] for p in pods.values()} == {40}


@pytest.mark.parametrize('kind', _KINDS)
def test_scheduling_flags_reach_the_pods(kind):
  toleration = k8s_flags.parse_toleration('nvidia.com/gpu:NoSchedule')
  assert toleration == {'key': 'nvidia.com/gpu', 'operator': 'Exists', 'effect': 'NoSchedule'}
  options = _options(gpus_per_worker=1, priority_class='training', scheduler_name='volcano',
                     node_selector={'cloud.google.com/gke-accelerator': 'nvidia-l4'},
                     tolerations=[toleration, k8s_flags.parse_toleration('pool=gpu')])
  pods = _pod_specs(options, kind)
  for role, pod in pods.items():
    assert pod['priorityClassName'] == 'training'
    assert pod['schedulerName'] == 'volcano'
    gpu_pod = role in ('chief', 'worker')
    # Node selector and tolerations go to the GPU pods only.
    assert ('nodeSelector' in pod) == gpu_pod and ('tolerations' in pod) == gpu_pod, role
  assert pods['worker']['nodeSelector'] == {'cloud.google.com/gke-accelerator': 'nvidia-l4'}
  assert pods['worker']['tolerations'][1] == {'key': 'pool', 'operator': 'Equal',
                                              'value': 'gpu'}
  # Without GPUs, every pod gets them.
  pods = _pod_specs(options._replace(gpus_per_worker=0), kind)
  assert all('nodeSelector' in p and 'tolerations' in p for p in pods.values())


def test_tfjob_run_policy_flags():
  options = _options(active_deadline_secs=7200, ttl_secs_after_finished=600,
                     gang_scheduling=True, scheduler_name='volcano', priority_class='high',
                     kueue_queue='team-a')
  job = tfjob.tfjob_manifest(options)
  assert job['spec']['runPolicy'] == {
      'backoffLimit': 6, 'cleanPodPolicy': 'Running', 'activeDeadlineSeconds': 7200,
      'ttlSecondsAfterFinished': 600,
      # The evaluator is a Job of its own: training starts without waiting for it.
      'schedulingPolicy': {'minAvailable': 3, 'priorityClass': 'high'}}
  assert job['metadata']['labels'] == {'kueue.x-k8s.io/queue-name': 'team-a'}


@pytest.mark.parametrize('items, message', [
    (['ps'], 'must be ROLE:KEY=VALUE'),
    (['ps:cores=2'], "'cores=2' is not KEY=VALUE"),
    (['evaluator:gpu=one'], 'gpu must be a count'),
])
def test_bad_resources_flags(items, message):
  with pytest.raises(ValueError, match=message):
    k8s_flags.parse_resources(items)
  assert k8s_flags.parse_resources(['ps:cpu=2,memory=8Gi', 'evaluator:gpu=1']) == {
      'ps': {'cpu': '2', 'memory': '8Gi'}, 'evaluator': {'gpu': 1}}


def test_env_values_keep_commas_and_equals():
  assert k8s_flags.parse_env(['HOSTS=a:1,b:2', 'OPTS=x=1']) == {'HOSTS': 'a:1,b:2',
                                                               'OPTS': 'x=1'}
  with pytest.raises(ValueError, match='--env: value must be NAME=VALUE'):
    k8s_flags.parse_env(['1BAD=x'])
  with pytest.raises(ValueError, match='--toleration: value must be KEY'):
    k8s_flags.parse_toleration('gpu:Sometimes')


def test_command_line_writes_a_jobset_with_repeated_flags(tmp_path):
  config = tmp_path / 'pipeline.config'
  with open(os.path.join(cluster_util.REPO_ROOT, 'configs', 'ssd_shapes.config')) as f:
    text = f.read()
  config.write_text(text.replace('clone_on_cpu: true', 'clone_on_cpu: true\n'
                                 '  termination_grace_secs: 120'))
  output = tmp_path / 'job.yaml'
  env = dict(os.environ, PYTHONPATH=cluster_util.REPO_ROOT, CUDA_VISIBLE_DEVICES='')
  subprocess.run([sys.executable, '-m', 'deployment.tfjob', '--kind=jobset',
                  '--job_name=shapes', '--image=img', '--pipeline_config_path=%s' % config,
                  '--train_dir=/mnt/shared/train', '--pvc=claim', '--gpus_per_worker=1',
                  '--env=HOSTS=a:1,b:2', '--env=MODE=fast', '--resources=ps:cpu=2',
                  '--node_selector=pool=gpu', '--toleration=nvidia.com/gpu:NoSchedule',
                  '--ttl_secs_after_finished=60', '--output=%s' % output],
                 cwd=cluster_util.REPO_ROOT, env=env, check=True, timeout=240)
  policy, job = yaml.safe_load_all(output.read_text())
  assert (policy['kind'], job['kind']) == ('NetworkPolicy', 'JobSet')
  assert job['spec']['ttlSecondsAfterFinished'] == 60
  pods = {r['name']: r['template']['spec']['template']['spec']
          for r in job['spec']['replicatedJobs']}
  worker = pods['worker']['containers'][0]
  assert worker['env'][2:] == [{'name': 'HOSTS', 'value': 'a:1,b:2'},
                               {'name': 'MODE', 'value': 'fast'}]
  assert pods['worker']['terminationGracePeriodSeconds'] == 135  # from the config
  assert pods['worker']['nodeSelector'] == {'pool': 'gpu'}
  # The ps memory comes from the model's variables (the config is readable here).
  assert pods['ps']['containers'][0]['resources'] == {
      'requests': {'cpu': '2', 'memory': '1280Mi'}, 'limits': {'memory': '1280Mi'}}
  # The evaluator stops after the config's last step (train_config.num_steps: 1000).
  assert pods['evaluator']['containers'][0]['args'][-1] == '--num_train_steps=1000'



# ----------------------------------------------------------------------------
# Issue 47: storage and identity, resources, the deadline.

@pytest.mark.parametrize('kind', _KINDS)
def test_service_account_and_volume_group_reach_every_pod(kind):
  options = _options(output_dir='/mnt/shared/train', pvc='rwx', service_account='trainer',
                     run_as_user=2000, fs_group=3000)
  for role, pod in _pod_specs(options, kind).items():
    assert pod['serviceAccountName'] == 'trainer', role
    # Workload Identity and IRSA need no API token in the pod.
    assert pod['automountServiceAccountToken'] is False
    assert pod['securityContext'] == {
        'runAsNonRoot': True, 'runAsUser': 2000, 'runAsGroup': 2000, 'fsGroup': 3000,
        'fsGroupChangePolicy': 'OnRootMismatch', 'seccompProfile': {'type': 'RuntimeDefault'}}
    assert restricted_profile_violations(pod) == []
  # Without the flags: no service account, the volume group is the user's.
  for pod in _pod_specs(_options(), kind).values():
    assert 'serviceAccountName' not in pod
    assert (pod['securityContext']['fsGroup'],
            pod['securityContext']['fsGroupChangePolicy']) == (1000, 'OnRootMismatch')


def test_only_file_systems_the_image_opens_are_accepted():
  for path in ('gs://bucket/train', '/mnt/shared/train'):
    tfjob.manifests(_options(output_dir=path, pvc='rwx'))
  with pytest.raises(ValueError, match='--train_dir: value uses s3://'):
    tfjob.manifests(_options(output_dir='s3://bucket/train'))
  # The user says the image imports tensorflow_io: s3 (and only s3) is then accepted.
  options = _options(output_dir='s3://bucket/train', extra_filesystems=('s3',))
  tfjob.manifests(options)
  with pytest.raises(ValueError, match='--train_dir: value uses hdfs://'):
    tfjob.manifests(options._replace(output_dir='hdfs://nn/train'))
  with pytest.raises(ValueError, match='--model_dir: value uses az://'):
    tfjob.manifests(_options(program='trainer.model_main', output_dir='az://c/model'))


@pytest.mark.parametrize('kind', _KINDS)
def test_every_role_has_requests_and_a_memory_limit_by_default(kind):
  pods = _pod_specs(_options(), kind)
  assert sorted(pods) == ['chief', 'evaluator', 'ps', 'worker']
  expected = {'chief': ('4', '16Gi'), 'worker': ('4', '16Gi'), 'ps': ('2', '4Gi'),
              'evaluator': ('2', '8Gi')}
  for role, (cpu, memory) in expected.items():
    resources = pods[role]['containers'][0]['resources']
    # Not BestEffort, and accepted where a ResourceQuota demands memory limits.
    assert resources == {'requests': {'cpu': cpu, 'memory': memory},
                         'limits': {'memory': memory}}, role


@pytest.mark.parametrize('kind', _KINDS)
def test_resources_and_limits_are_overridable(kind):
  options = _options(cpu='8', memory='32Gi', memory_limit='40Gi', resources={
      'ps': {'cpu': '1', 'memory': '2Gi', 'memory_limit': '3Gi'},
      'evaluator': {'memory': '6Gi', 'gpu': 1}})
  pods = _pod_specs(options, kind)
  resources = {role: pod['containers'][0]['resources'] for role, pod in pods.items()}
  assert resources['worker'] == {'requests': {'cpu': '8', 'memory': '32Gi'},
                                 'limits': {'memory': '40Gi'}}
  assert resources['ps'] == {'requests': {'cpu': '1', 'memory': '2Gi'},
                             'limits': {'memory': '3Gi'}}
  assert resources['evaluator'] == {'requests': {'cpu': '2', 'memory': '6Gi'},
                                    'limits': {'memory': '6Gi', 'nvidia.com/gpu': 1}}
  assert k8s_flags.parse_resources(['ps:memory=2Gi,memory_limit=3Gi']) == {
      'ps': {'memory': '2Gi', 'memory_limit': '3Gi'}}


def test_a_deadline_by_default_and_zero_for_none():
  week = 7 * 24 * 3600
  tfjob_doc = tfjob.manifests(_options())[1]
  assert tfjob_doc['spec']['runPolicy']['activeDeadlineSeconds'] == week
  evaluator_job = tfjob.manifests(_options())[2]
  assert evaluator_job['spec']['activeDeadlineSeconds'] == week
  jobset_doc = tfjob.manifests(_options(), 'jobset')[1]
  assert {r['template']['spec']['activeDeadlineSeconds']
          for r in jobset_doc['spec']['replicatedJobs']} == {week}
  assert 'DeadlineExceeded' in jobset_doc['spec']['failurePolicy']['rules'][-1][
      'onJobFailureReasons']
  # 0: no deadline anywhere, and no rule for it.
  documents = tfjob.manifests(_options(active_deadline_secs=0)) + tfjob.manifests(
      _options(active_deadline_secs=0), 'jobset')
  assert 'activeDeadlineSeconds' not in yaml.safe_dump_all(documents)
  assert 'DeadlineExceeded' not in yaml.safe_dump_all(documents)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
