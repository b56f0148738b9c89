"""TFJob + NetworkPolicy manifests (deployment/tfjob.py): written field by field, read back."""

import os
import sys
import textwrap

import pytest
import yaml

from deployment import replicas
from deployment import tfjob

_CONFIG = '/app/configs/ssd_shapes.config'


def _write(tmp_path, **kwargs):
  """Writes a manifest; returns (tfjob document, network policy document).

  The evaluator's own Job, when there is one, is kept in `_LAST_EVALUATOR_JOB`.
  """
  options = tfjob.job_options('shapes', 'registry.example.com/slimtrain:0.1', _CONFIG,
                              kwargs.pop('output_dir', 'gs://bucket/shapes/train'), **kwargs)
  path = str(tmp_path / 'job.yaml')
  assert tfjob.write_manifest(options, path) == path
  assert os.listdir(str(tmp_path)) == ['job.yaml']  # no temp file left behind
  with open(path) as f:
    text = f.read()
  assert '&id' not in text and '*id' not in text  # no YAML anchors/aliases
  documents = list(yaml.safe_load_all(text))
  # The NetworkPolicy first, so no pod of the job starts unprotected.
  assert [d['kind'] for d in documents] == ['NetworkPolicy', 'TFJob'] + (
      ['Job'] if options.evaluator else [])
  _LAST_EVALUATOR_JOB[:] = documents[2:]
  return documents[1], documents[0]


_LAST_EVALUATOR_JOB = []


def _container(job, manifest_type):
  containers = job['spec']['tfReplicaSpecs'][manifest_type]['template']['spec']['containers']
  assert len(containers) == 1
  return containers[0]


def test_trainer_train_job_field_by_field(tmp_path):
  job, policy = _write(tmp_path, namespace='ml', workers=2, ps=1, gpus_per_worker=2,
                       cpu='4', memory='16Gi', backoff_limit=3,
                       env={'GOOGLE_APPLICATION_CREDENTIALS': '/secrets/key.json'},
                       program_args=['--num_train_steps=2000'])
  assert job['apiVersion'] == 'kubeflow.org/v1'
  assert job['metadata'] == {'name': 'shapes', 'namespace': 'ml'}
  assert job['spec']['runPolicy'] == {'backoffLimit': 3, 'cleanPodPolicy': 'Running',
                                      'activeDeadlineSeconds': 7 * 24 * 3600}
  specs = job['spec']['tfReplicaSpecs']
  assert list(specs) == ['Chief', 'Worker', 'PS']  # the evaluator is a Job of its own
  assert {t: s['replicas'] for t, s in specs.items()} == {'Chief': 1, 'Worker': 2, 'PS': 1}
  assert {s['restartPolicy'] for s in specs.values()} == {'ExitCode'}
  train_args = ['--pipeline_config_path=' + _CONFIG, '--train_dir=gs://bucket/shapes/train',
                '--num_clones=2', '--noclone_on_cpu', '--alsologtostderr',
                '--num_train_steps=2000']
  for manifest_type in ('Chief', 'Worker'):
    container = _container(job, manifest_type)
    assert container['name'] == 'tensorflow'
    assert container['image'] == 'registry.example.com/slimtrain:0.1'
    assert container['command'] == ['python', '-m', 'trainer.train']
    assert container['args'] == train_args
    assert container['resources'] == {'requests': {'cpu': '4', 'memory': '16Gi'},
                                      'limits': {'memory': '16Gi', 'nvidia.com/gpu': 2}}
  ps = _container(job, 'PS')
  assert ps['command'] == ['python', '-m', 'trainer.train']
  assert ps['args'] == [a for a in train_args if a not in ('--num_clones=2',
                                                            '--noclone_on_cpu')]
  # The workers' CPU, memory and GPUs are theirs alone; the ps gets its defaults.
  assert ps['resources'] == {'requests': {'cpu': '2', 'memory': '4Gi'},
                             'limits': {'memory': '4Gi'}}
  evaluator_job, = _LAST_EVALUATOR_JOB
  evaluator = evaluator_job['spec']['template']['spec']['containers'][0]
  assert evaluator['command'] == ['python', '-m', 'trainer.eval']
  # It stops after evaluating the step the training tasks stop at.
  assert evaluator['args'] == ['--pipeline_config_path=' + _CONFIG,
                               '--checkpoint_dir=gs://bucket/shapes/train',
                               '--eval_dir=gs://bucket/shapes/train/eval', '--alsologtostderr',
                               '--num_train_steps=2000']
  assert evaluator['resources'] == {'requests': {'cpu': '2', 'memory': '8Gi'},
                                    'limits': {'memory': '8Gi'}}
  assert 'ports' not in evaluator  # nothing connects to it
  for container in [_container(job, t) for t in specs] + [evaluator]:
    assert container['env'] == [{'name': 'GOOGLE_APPLICATION_CREDENTIALS',
                                 'value': '/secrets/key.json'}]
  for manifest_type in specs:
    assert _container(job, manifest_type)['ports'] == [{'name': 'tfjob-port',
                                                        'containerPort': 2222}]

  assert policy['apiVersion'] == 'networking.k8s.io/v1'
  assert policy['metadata'] == {'name': 'shapes-grpc', 'namespace': 'ml'}
  same_job = {'matchLabels': {'training.kubeflow.org/job-name': 'shapes'}}
  assert policy['spec'] == {'podSelector': same_job, 'policyTypes': ['Ingress'],
                            'ingress': [{'from': [{'podSelector': same_job}],
                                         'ports': [{'protocol': 'TCP', 'port': 2222}]}]}


def test_model_main_job_without_chief_and_gpus(tmp_path):
  job, _ = _write(tmp_path, program='trainer.model_main', output_dir='/mnt/shared/model',
                  pvc='models', chief=False, workers=3, ps=2, evaluator=True, port=2345)
  specs = job['spec']['tfReplicaSpecs']
  assert list(specs) == ['Worker', 'PS']
  assert (specs['Worker']['replicas'], specs['PS']['replicas']) == (3, 2)
  args = ['--pipeline_config_path=' + _CONFIG, '--model_dir=/mnt/shared/model',
          '--alsologtostderr']
  evaluator_job, = _LAST_EVALUATOR_JOB
  pods = [specs[t]['template']['spec'] for t in specs] + [
      evaluator_job['spec']['template']['spec']]
  for pod in pods:  # the evaluator is model_main's evaluator role
    container = pod['containers'][0]
    assert container['command'] == ['python', '-m', 'trainer.model_main']
    assert container['args'] == args
    assert container['volumeMounts'] == [{'name': 'shared', 'mountPath': '/mnt/shared'}]
    assert pod['volumes'] == [{'name': 'shared',
                               'persistentVolumeClaim': {'claimName': 'models'}}]
  for pod in pods[:2]:
    assert 'env' not in pod['containers'][0]  # the operator sets TF_CONFIG
    assert pod['containers'][0]['ports'] == [{'name': 'tfjob-port', 'containerPort': 2345}]
  # An evaluator outside the training cluster, as model_main's evaluator task expects.
  assert pods[2]['containers'][0]['env'] == [{'name': 'TF_CONFIG', 'value': (
      '{"cluster": {}, "environment": "cloud", "task": {"index": 0, "type": "evaluator"}}')}]


@pytest.mark.parametrize('kwargs, message', [
    (dict(job_name='Shapes_1'), '--job_name: value must be a DNS-1035 label'),
    (dict(job_name='1shapes'), '--job_name: value must be a DNS-1035 label'),
    (dict(job_name='s' * 48), "--job_name: value is too long for --kind=tfjob: it makes the "
     "evaluator pod name 's+-evaluator-abcde' \\(64 characters, at most 63\\); shorten it by "
     "1"),
    (dict(namespace='ML'), '--namespace: value must be a DNS label'),
    (dict(image=''), '--image: value is required'),
    (dict(pipeline_config_path=''), '--pipeline_config_path: value is required'),
    (dict(output_dir=''), '--train_dir: value is required with --program=trainer.train'),
    (dict(output_dir='', program='trainer.model_main'), '--model_dir: value is required'),
    (dict(program='trainer.eval'), '--program: value must be one of'),
    (dict(workers=-1), '--workers: value must be >= 0'),
    (dict(chief=False, workers=0), '--workers: value must be >= 1 with --nochief'),
    (dict(gpus_per_worker=-2), '--gpus_per_worker: value must be >= 0'),
    (dict(cpu='four'), "--cpu: value must be a Kubernetes quantity like 4, 500m or 16Gi, "
     "got 'four'"),
    (dict(memory='16GB'), '--memory: value must be a Kubernetes quantity'),
    (dict(port=70000), '--port: value must be 1..65535'),
    (dict(restart_policy='Sometimes'), '--restart_policy: value must be one of'),
    (dict(backoff_limit=-1), '--backoff_limit: value must be >= 0'),
    (dict(ps=0), '--ps: value must be >= 1 with 2 training tasks'),
    (dict(env={'TF_CONFIG': '{}'}), '--env: value TF_CONFIG is set by the engine'),
    (dict(pvc=None), "--train_dir: value is a directory in each pod's own file system.*"
     "Add --pvc=<ReadWriteMany claim>"),
    (dict(output_dir='/tmp/train'), '--train_dir: value is not on the shared volume: '
     '--pvc=claim is mounted at --mount_path=/mnt/shared'),
    (dict(gang_scheduling=True), '--gang_scheduling: value needs a gang scheduler: add '
     '--scheduler_name'),
    (dict(resources={'worker': {'cpu': '2'}}), '--resources: value sets ps and evaluator only'),
    (dict(resources={'ps': {'gpu': 1}}), '--resources: value of ps: gpu is a count >= 0 of '
     'the evaluator'),
    (dict(run_as_user=0), '--run_as_user: value must be a user id > 0'),
    (dict(active_deadline_secs=-1), r'--active_deadline_secs: value must be >= 0 \(0: no '
     r'deadline\)'),
    # Issue 47: storage TensorFlow cannot open, identity, volume group, limits, steps.
    (dict(output_dir='s3://bucket/train'), '--train_dir: value uses s3://, which TensorFlow '
     '2.21 cannot open .*tensorflow-io provides it.*import tensorflow_io.*'
     '--extra_filesystems=s3.*or mount the storage as a ReadWriteMany volume'),
    (dict(output_dir='hdfs://namenode/train'), '--train_dir: value uses hdfs://'),
    (dict(output_dir='ram://train'), "--train_dir: value is in one process's memory"),
    (dict(pipeline_config_path='s3://bucket/pipeline.config'),
     '--pipeline_config_path: value uses s3://'),
    (dict(output_dir='s3://bucket/train', extra_filesystems=('S3!',)),
     '--extra_filesystems: value must list URL schemes'),
    (dict(service_account='Trainer_SA'), '--service_account: value must be a ServiceAccount '
     'name'),
    (dict(fs_group=-1), '--fs_group: value must be a group id >= 0'),
    (dict(memory='16Gi', memory_limit='8Gi'), '--memory_limit: value of chief: the memory '
     'limit 8Gi is below the memory request 16Gi'),
    (dict(resources={'ps': {'memory_limit': '1Gi'}}), '--resources: value of ps: the memory '
     'limit 1Gi is below the memory request 4Gi'),
    (dict(memory_limit='lots'), '--memory_limit: value must be a Kubernetes quantity'),
    (dict(num_train_steps=-1), '--num_train_steps: value must be >= 0'),
    (dict(num_train_steps=100, program_args=['--num_train_steps=200']),
     '--num_train_steps: value differs from --num_train_steps=200 after "--"'),
    (dict(evaluator_restart='never'), '--evaluator_restart: value must be one of alone, '
     'whole_job'),
])
def test_bad_options_name_the_flag(kwargs, message):
  base = dict(job_name='shapes', image='img', pipeline_config_path=_CONFIG,
              output_dir='/mnt/shared/train', pvc='claim')
  base.update(kwargs)
  options = tfjob.job_options(base.pop('job_name'), base.pop('image'),
                              base.pop('pipeline_config_path'), base.pop('output_dir'), **base)
  with pytest.raises(ValueError, match=message):
    tfjob.manifest_text(options)


def test_generated_manifest_reads_back_as_replica_specs(tmp_path):
  options = tfjob.job_options('shapes', 'img', _CONFIG, '/tmp/train', namespace='ml',
                              workers=2, backoff_limit=4, restart_policy='OnFailure',
                              pvc='scratch', mount_path='/tmp')
  path = tfjob.write_manifest(options, str(tmp_path / 'job.yaml'))
  job = tfjob.read_tfjob(path)
  assert (job.name, job.namespace, job.backoff_limit, job.port) == ('shapes', 'ml', 4, 2222)
  by_type = {spec.replica_type: spec for spec in job.specs}
  assert sorted(by_type) == ['chief', 'evaluator', 'ps', 'worker']
  assert by_type['worker'].replicas == 2
  assert by_type['worker'].command == ['python', '-m', 'trainer.train',
                                       '--pipeline_config_path=' + _CONFIG,
                                       '--train_dir=/tmp/train', '--alsologtostderr']
  # The evaluator comes from its own Job in the same file.
  assert by_type['evaluator'].command[:3] == ['python', '-m', 'trainer.eval']
  assert {s.restart_policy for s in job.specs} == {'OnFailure'}
  # Under ExitCode, the evaluator Job has no FailJob rule: locally it restarts on failure.
  path = tfjob.write_manifest(options._replace(restart_policy='ExitCode'), path)
  by_type = {spec.replica_type: spec for spec in tfjob.read_tfjob(path).specs}
  assert (by_type['worker'].restart_policy, by_type['evaluator'].restart_policy) == (
      'ExitCode', 'OnFailure')
  assert tfjob.service_addresses(job) == {
      'chief': ['shapes-chief-0.ml.svc:2222'],
      'worker': ['shapes-worker-0.ml.svc:2222', 'shapes-worker-1.ml.svc:2222'],
      'ps': ['shapes-ps-0.ml.svc:2222'],
      # The operator gives the evaluator a service and lists it in TF_CONFIG too.
      'evaluator': ['shapes-evaluator-0.ml.svc:2222']}


_HAND_WRITTEN = """\
apiVersion: v1
kind: Service
metadata: {name: unrelated}
---
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: legacy}
spec:
  backoffLimit: 2
  tfReplicaSpecs:
    Master:
      template:
        spec:
          containers:
          - name: sidecar
            image: busybox
            command: [sleep, "1000"]
          - name: tensorflow
            image: img
            command: [python3, -m, trainer.train]
            args: [--train_dir=/tmp/t]
            env:
            - {name: A, value: "1"}
            - name: SECRET
              valueFrom: {secretKeyRef: {name: s, key: k}}
    Worker:
      replicas: 2
      restartPolicy: ExitCode
      template:
        spec:
          containers:
          - name: tensorflow
            image: img
            command: [python3, -m, trainer.train]
"""


def test_hand_written_operator_manifest(tmp_path):
  path = tmp_path / 'job.yaml'
  path.write_text(_HAND_WRITTEN)
  job = tfjob.read_tfjob(str(path))
  assert (job.name, job.namespace, job.backoff_limit) == ('legacy', 'default', 2)
  master, worker = job.specs
  # Defaults of the operator: one replica, restartPolicy Never.
  assert master == replicas.ReplicaSpec('master', 1, ['python3', '-m', 'trainer.train',
                                                      '--train_dir=/tmp/t'], {'A': '1'},
                                        'Never')
  assert (worker.replicas, worker.restart_policy) == (2, 'ExitCode')
  assert tfjob.service_addresses(job) == {
      'master': ['legacy-master-0.default.svc:2222'],
      'worker': ['legacy-worker-0.default.svc:2222', 'legacy-worker-1.default.svc:2222']}


@pytest.mark.parametrize('edit, message', [
    (lambda m: m.update(apiVersion='kubeflow.org/v1beta2'), 'apiVersion must be kubeflow.org/v1'),
    (lambda m: m['metadata'].pop('name'), 'metadata.name must be set'),
    (lambda m: m['spec'].pop('tfReplicaSpecs'), 'spec.tfReplicaSpecs must describe at least'),
    (lambda m: m['spec']['tfReplicaSpecs'].update(Trainer={}),
     'spec.tfReplicaSpecs.Trainer is not a TFJob replica type'),
    (lambda m: m['spec']['tfReplicaSpecs']['Worker'].update(replicas='two'),
     "spec.tfReplicaSpecs.Worker.replicas must be an integer, got 'two'"),
    (lambda m: m['spec']['tfReplicaSpecs']['Worker'].update(restartPolicy='Sometimes'),
     'spec.tfReplicaSpecs.Worker.restartPolicy must be one of'),
    (lambda m: m['spec']['tfReplicaSpecs']['Worker']['template']['spec']['containers'][0].pop(
        'command'), r'Worker.template.spec.containers\[tensorflow\].command must list the '
     'program'),
    (lambda m: m['spec']['tfReplicaSpecs']['Worker']['template']['spec'].update(containers=[]),
     'Worker.template.spec.containers must list at least one container'),
    (lambda m: m['spec']['tfReplicaSpecs']['Master'].update(replicas=2),
     "replica type 'master': replicas must be 0 or 1"),
    (lambda m: m['spec'].update(runPolicy={'backoffLimit': -1}),
     'spec.runPolicy.backoffLimit must be >= 0'),
])
def test_bad_manifests_name_the_key(edit, message):
  manifest = list(yaml.safe_load_all(_HAND_WRITTEN))[1]
  edit(manifest)
  with pytest.raises(ValueError, match=message):
    tfjob.parse_tfjob(manifest, source='job.yaml')


def test_files_with_no_or_two_tfjobs_are_rejected(tmp_path):
  path = tmp_path / 'job.yaml'
  path.write_text('kind: Service\n')
  with pytest.raises(ValueError, match='must hold exactly one document of kind TFJob, found 0'):
    tfjob.read_tfjob(str(path))
  path.write_text(textwrap.dedent(_HAND_WRITTEN) + '---\n' + _HAND_WRITTEN.split('---\n')[1])
  with pytest.raises(ValueError, match='found 2'):
    tfjob.read_tfjob(str(path))
  path.write_text('a: [b\n')
  with pytest.raises(ValueError, match='is not valid YAML'):
    tfjob.read_tfjob(str(path))



def test_the_evaluator_is_a_job_beside_the_tfjob(tmp_path):
  _write(tmp_path, namespace='ml', backoff_limit=4, ttl_secs_after_finished=600,
         kueue_queue='team-a', program_args=['--num_train_steps=50'])
  evaluator_job, = _LAST_EVALUATOR_JOB
  assert (evaluator_job['apiVersion'], evaluator_job['kind']) == ('batch/v1', 'Job')
  assert evaluator_job['metadata'] == {
      'name': 'shapes-evaluator', 'namespace': 'ml',
      'labels': {'app.kubernetes.io/part-of': 'shapes', 'app.kubernetes.io/component':
                 'evaluator', 'kueue.x-k8s.io/queue-name': 'team-a'}}
  spec = evaluator_job['spec']
  # It outlives the TFJob's success and its failures stay its own.
  assert (spec['backoffLimit'], spec['ttlSecondsAfterFinished']) == (4, 600)
  assert spec['podFailurePolicy']['rules'] == [
      {'action': 'Ignore', 'onPodConditions': [{'type': 'DisruptionTarget', 'status': 'True'}]}]
  pod = spec['template']['spec']
  assert pod['restartPolicy'] == 'Never'
  assert pod['containers'][0]['args'][-1] == '--num_train_steps=50'
  # Without an evaluator there is no Job.
  _write(tmp_path, evaluator=False)
  assert _LAST_EVALUATOR_JOB == []


def test_the_reader_takes_the_evaluator_job_only_with_its_tfjob(tmp_path):
  options = tfjob.job_options('shapes', 'img', _CONFIG, 'gs://b/t')
  path = str(tmp_path / 'job.yaml')
  documents = tfjob.manifests(options)
  documents[2]['metadata']['labels']['app.kubernetes.io/part-of'] = 'other'
  with open(path, 'w') as f:
    yaml.safe_dump_all(documents, f)
  assert sorted(s.replica_type for s in tfjob.read_tfjob(path).specs) == [
      'chief', 'ps', 'worker']


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
