"""deployment.cluster: TF_CONFIG layouts, and errors naming key and value."""

import json
import sys

import pytest
import tensorflow as tf

from builders import input_reader_builder
from deployment import cluster as cluster_lib
from deployment import ports as ports_lib
from tests import test_util

ClusterConfig = cluster_lib.ClusterConfig


def _env(tf_config):
  return {'TF_CONFIG': tf_config if isinstance(tf_config, str) else json.dumps(tf_config)}


CHIEF_STYLE = {'chief': ['h0:2222'], 'worker': ['h1:2222', 'h2:2222'],
               'ps': ['h3:2222', 'h4:2222']}
MASTER_STYLE = {'master': ['h0:2222'], 'worker': ['h1:2222'], 'ps': ['h3:2222']}


@pytest.mark.parametrize('env', [{}, {'TF_CONFIG': ''}, {'TF_CONFIG': '  '},
                                 _env({}), _env({'cluster': {}}),
                                 _env({'task': {'type': 'worker', 'index': 0}})])
def test_local(env):
  config = ClusterConfig.from_tf_config(env)
  assert config.task_type == 'worker'
  assert config.task_index == 0
  assert config.is_chief
  assert not config.is_distributed
  assert config.num_worker_replicas == 1
  assert config.num_ps_tasks == 0
  assert config.master == ''
  assert config.worker_job_name == 'worker'
  assert config.cluster_spec.as_dict() == {}
  with pytest.raises(ValueError, match='start_server'):
    config.start_server()


def test_default_env_is_os_environ(monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps(
      {'cluster': CHIEF_STYLE, 'task': {'type': 'ps', 'index': 1}}))
  config = ClusterConfig.from_tf_config()
  assert (config.task_type, config.task_index) == ('ps', 1)


@pytest.mark.parametrize('task_type, index, is_chief, job_name, address', [
    ('chief', 0, True, 'chief/task:0', 'h0:2222'),
    ('worker', 0, False, 'worker/task:0', 'h1:2222'),
    ('worker', 1, False, 'worker/task:1', 'h2:2222'),
    ('ps', 1, False, 'ps/task:1', 'h4:2222'),
])
def test_chief_style(task_type, index, is_chief, job_name, address):
  config = ClusterConfig.from_tf_config(
      _env({'cluster': CHIEF_STYLE, 'task': {'type': task_type, 'index': index}}))
  assert config.task_type == task_type
  assert config.task_index == index
  assert config.is_chief == is_chief
  assert config.is_distributed
  assert config.num_worker_replicas == 3
  assert config.num_ps_tasks == 2
  assert config.master == 'grpc://' + address
  if task_type != 'ps':
    assert config.worker_job_name == job_name
  assert config.cluster_spec.as_dict() == CHIEF_STYLE
  assert isinstance(config.cluster_spec, tf.train.ClusterSpec)


def test_master_style():
  config = ClusterConfig.from_tf_config(
      _env({'cluster': MASTER_STYLE, 'task': {'type': 'master', 'index': 0}}))
  assert config.is_chief
  assert config.num_worker_replicas == 2
  assert config.num_ps_tasks == 1
  assert config.worker_job_name == 'master/task:0'
  assert config.device_filters == ['/job:ps', '/job:master']
  worker = ClusterConfig.from_tf_config(
      _env({'cluster': MASTER_STYLE, 'task': {'type': 'worker', 'index': 0}}))
  assert not worker.is_chief
  assert worker.device_filters == ['/job:ps', '/job:worker/task:0']


def test_worker_only_cluster_makes_worker_0_chief():
  cluster = {'worker': ['127.0.0.1:1', '127.0.0.1:2'], 'ps': ['127.0.0.1:3']}
  first, second = [ClusterConfig.from_tf_config(
      _env({'cluster': cluster, 'task': {'type': 'worker', 'index': i}})) for i in (0, 1)]
  assert first.is_chief and not second.is_chief
  assert first.num_worker_replicas == 2


def test_evaluator():
  cluster = dict(CHIEF_STYLE, evaluator=['h9:2222'])
  config = ClusterConfig.from_tf_config(
      _env({'cluster': cluster, 'task': {'type': 'evaluator', 'index': 0}}))
  assert config.is_evaluator and not config.is_chief and not config.is_distributed
  assert config.cluster_spec.as_dict() == {}
  assert config.master == ''
  assert config.num_worker_replicas == 0 and config.num_ps_tasks == 0
  # The evaluator does not have to be listed in the cluster.
  config = ClusterConfig.from_tf_config(
      _env({'cluster': CHIEF_STYLE, 'task': {'type': 'evaluator', 'index': 0}}))
  assert config.is_evaluator
  # Nor does it need a cluster at all.
  assert ClusterConfig.from_tf_config(
      _env({'task': {'type': 'evaluator', 'index': 0}})).is_evaluator


# What the Kubeflow training operator (release-1.9, genTFConfigJSONStr) puts into the
# worker 1 pod of a TFJob "shapes" in namespace "ml" with a Chief, two Workers, a PS and
# an Evaluator: every replica type in "cluster" (the evaluator since its PR #1146),
# keys as Go marshals them.
OPERATOR_TF_CONFIG = (
    '{"cluster":{"chief":["shapes-chief-0.ml.svc:2222"],'
    '"evaluator":["shapes-evaluator-0.ml.svc:2222"],"ps":["shapes-ps-0.ml.svc:2222"],'
    '"worker":["shapes-worker-0.ml.svc:2222","shapes-worker-1.ml.svc:2222"]},'
    '"task":{"type":"worker","index":1},"environment":"cloud"}')


@pytest.mark.parametrize('task_type, index', [
    ('chief', 0), ('worker', 0), ('worker', 1), ('ps', 0), ('evaluator', 0)])
def test_operator_tf_config_with_the_evaluator_in_the_cluster(task_type, index):
  tf_config = json.loads(OPERATOR_TF_CONFIG)
  tf_config['task'] = {'type': task_type, 'index': index}
  config = ClusterConfig.from_tf_config(_env(tf_config))
  assert (config.task_type, config.task_index) == (task_type, index)
  assert config.cluster == tf_config['cluster']
  if task_type == 'evaluator':
    assert config.is_evaluator and not config.is_distributed and config.master == ''
    assert config.cluster_spec.as_dict() == {}
    return
  # Training tasks: the evaluator is neither a task of their servers nor a device.
  assert config.cluster_spec.as_dict() == {
      job: addresses for job, addresses in tf_config['cluster'].items() if job != 'evaluator'}
  assert not any('evaluator' in f for f in config.device_filters)
  assert config.num_worker_replicas == 3 and config.num_ps_tasks == 1
  assert config.is_chief == (task_type == 'chief')
  assert config.master == 'grpc://%s' % tf_config['cluster'][task_type][index]


def test_training_servers_ignore_the_evaluator_address_nobody_listens_on():
  # The operator's shape on loopback: the evaluator's address is listed, never served.
  chief, ps, evaluator = ports_lib.loopback_addresses(3)
  cluster = {'chief': [chief], 'ps': [ps], 'evaluator': [evaluator]}
  configs = {t: ClusterConfig.from_tf_config(_env({'cluster': cluster, 'environment': 'cloud',
                                                   'task': {'type': t, 'index': 0}}))
             for t in ('chief', 'ps')}
  configs['ps'].start_server()
  server = configs['chief'].start_server()
  with tf.Graph().as_default():
    with tf.device('/job:ps/task:0'):
      total = tf.compat.v1.get_variable('total', initializer=1.0)
    add = total.assign_add(2.0)
    with tf.compat.v1.Session(server.target, config=configs['chief'].session_config()) as sess:
      sess.run(tf.compat.v1.global_variables_initializer(),
               options=tf.compat.v1.RunOptions(timeout_in_ms=60000))
      assert sess.run(add) == 3.0


def test_session_master_and_single_node_cluster():
  config = ClusterConfig.from_tf_config(_env(
      {'cluster': CHIEF_STYLE, 'task': {'type': 'worker', 'index': 0},
       'session_master': 'grpc://elsewhere:1'}))
  assert config.master == 'grpc://elsewhere:1'
  single = ClusterConfig.from_tf_config(
      _env({'cluster': {'chief': ['h0:1']}, 'task': {'type': 'chief', 'index': 0}}))
  assert single.master == '' and not single.is_distributed and single.is_chief


def test_ipv6_address_and_extra_keys():
  config = ClusterConfig.from_tf_config(_env(
      {'cluster': {'chief': ['[::1]:2222'], 'ps': ['[::1]:2223']},
       'task': {'type': 'chief', 'index': 0}, 'environment': 'cloud', 'rpc_layer': 'grpc'}))
  assert config.master == 'grpc://[::1]:2222'


def test_require_ps():
  cluster = {'chief': ['h0:1'], 'worker': ['h1:1']}
  config = ClusterConfig.from_tf_config(
      _env({'cluster': cluster, 'task': {'type': 'chief', 'index': 0}}))
  assert config.num_ps_tasks == 0
  with pytest.raises(ValueError, match=r'TF_CONFIG\["cluster"\] has 2 worker replicas but no '
                     r'"ps" job.*got \{"chief"'):
    ClusterConfig.from_tf_config(
        _env({'cluster': cluster, 'task': {'type': 'chief', 'index': 0}}), require_ps=True)


def _task(task_type='worker', index=0):
  return {'type': task_type, 'index': index}


# (TF_CONFIG, regex the message must match: the key and the bad value).
MALFORMED = [
    ('{"cluster": ', r"TF_CONFIG is not valid JSON .*got '\{\"cluster\": '"),
    ('[1, 2]', r'TF_CONFIG must be a JSON object.*got \[1, 2\]'),
    ({'cluster': ['h0:1'], 'task': _task()},
     r'TF_CONFIG\["cluster"\] must be an object.*got \["h0:1"\]'),
    ({'cluster': CHIEF_STYLE, 'task': 'worker'},
     r'TF_CONFIG\["task"\] must be an object.*got "worker"'),
    ({'cluster': CHIEF_STYLE, 'task': _task('trainer')},
     r'TF_CONFIG\["task"\]\["type"\] must be one of .*got "trainer"'),
    ({'cluster': {'chief': ['h0:1'], 'worker': ['h1:1']}, 'task': _task('ps')},
     r'TF_CONFIG\["task"\]\["type"\] is not a job of TF_CONFIG\["cluster"\] '
     r'\(jobs: chief, worker\), got "ps"'),
    ({'cluster': CHIEF_STYLE, 'task': {'index': 0}},
     r'TF_CONFIG\["task"\] must set "type".*got \{"index": 0\}'),
    ({'cluster': CHIEF_STYLE, 'task': {'type': 'worker'}},
     r'TF_CONFIG\["task"\] must set "index".*got \{"type": "worker"\}'),
    ({'cluster': CHIEF_STYLE, 'task': _task('worker', 2)},
     r'TF_CONFIG\["task"\]\["index"\] is out of range for job "worker" with 2 task\(s\).*'
     r'got 2'),
    ({'cluster': CHIEF_STYLE, 'task': _task('worker', -1)},
     r'TF_CONFIG\["task"\]\["index"\] must be >= 0, got -1'),
    ({'cluster': CHIEF_STYLE, 'task': _task('worker', '1')},
     r'TF_CONFIG\["task"\]\["index"\] must be an integer, got "1"'),
    ({'cluster': CHIEF_STYLE, 'task': _task('worker', True)},
     r'TF_CONFIG\["task"\]\["index"\] must be an integer, got true'),
    ({'cluster': dict(CHIEF_STYLE, chief=['h0:1', 'h9:1']), 'task': _task('chief')},
     r'TF_CONFIG\["cluster"\]\["chief"\] must list exactly one address, '
     r'got \["h0:1", "h9:1"\]'),
    ({'cluster': dict(MASTER_STYLE, master=['h0:1', 'h9:1']), 'task': _task('master')},
     r'TF_CONFIG\["cluster"\]\["master"\] must list exactly one address'),
    ({'cluster': dict(CHIEF_STYLE, master=['h9:1']), 'task': _task('chief')},
     r'TF_CONFIG\["cluster"\] has both a "chief" and a "master" job.*got \{'),
    ({'cluster': {'chief': ['h0:1'], 'worker': ['h1:1', '']}, 'task': _task()},
     r'TF_CONFIG\["cluster"\]\["worker"\]\[1\] is an empty address.*got ""'),
    ({'cluster': {'chief': ['h0:1'], 'worker': ['localhost']}, 'task': _task()},
     r'TF_CONFIG\["cluster"\]\["worker"\]\[0\] has no port.*got "localhost"'),
    ({'cluster': {'chief': ['h0:1'], 'worker': ['h1:http']}, 'task': _task()},
     r'TF_CONFIG\["cluster"\]\["worker"\]\[0\] has an invalid port "http".*got "h1:http"'),
    ({'cluster': {'chief': ['h0:1'], 'worker': ['h1:70000']}, 'task': _task()},
     r'TF_CONFIG\["cluster"\]\["worker"\]\[0\] has an invalid port "70000"'),
    ({'cluster': {'chief': ['h0:1'], 'worker': [':2222']}, 'task': _task()},
     r'TF_CONFIG\["cluster"\]\["worker"\]\[0\] has no port.*got ":2222"'),
    ({'cluster': {'chief': ['h0:1'], 'worker': ['my host:1']}, 'task': _task()},
     r'TF_CONFIG\["cluster"\]\["worker"\]\[0\] has an invalid host "my host"'),
    ({'cluster': {'chief': ['h0:1'], 'worker': [2222]}, 'task': _task()},
     r'TF_CONFIG\["cluster"\]\["worker"\]\[0\] must be a "host:port" string, got 2222'),
    ({'cluster': {'chief': ['h0:1'], 'worker': ['h1:1'], 'ps': ['h1:1']}, 'task': _task()},
     r'TF_CONFIG\["cluster"\]\["ps"\]\[0\] repeats the address of '
     r'TF_CONFIG\["cluster"\]\["worker"\]\[0\], got "h1:1"'),
    ({'cluster': {'chief': ['h0:1'], 'worker': []}, 'task': _task('chief')},
     r'TF_CONFIG\["cluster"\]\["worker"\] is empty.*got \[\]'),
    ({'cluster': {'chief': ['h0:1'], 'worker': 'h1:1'}, 'task': _task('chief')},
     r'TF_CONFIG\["cluster"\]\["worker"\] must be a list.*got "h1:1"'),
    ({'cluster': {'chief': ['h0:1'], 'workers': ['h1:1']}, 'task': _task('chief')},
     r'TF_CONFIG\["cluster"\] has unknown job "workers".*got \{'),
    ({'cluster': {'ps': ['h0:1']}, 'task': _task('ps')},
     r'TF_CONFIG\["cluster"\] needs a "chief", "master" or "worker" job, '
     r'got \{"ps": \["h0:1"\]\}'),
    ({'cluster': MASTER_STYLE, 'task': _task('evaluator')},
     r'TF_CONFIG\["task"\]\["type"\] cannot be "evaluator" in a "master"-style cluster.*'
     r'got "evaluator"'),
    ({'cluster': CHIEF_STYLE, 'task': _task('evaluator', 1)},
     r'TF_CONFIG\["task"\]\["index"\] must be 0: there is only one evaluator, got 1'),
    ({'task': _task('ps')},
     r'TF_CONFIG\["task"\]\["type"\] must be "worker" or "evaluator" when '
     r'TF_CONFIG\["cluster"\] is empty, got "ps"'),
    ({'task': _task('worker', 1)},
     r'TF_CONFIG\["task"\]\["index"\] must be 0 when TF_CONFIG\["cluster"\] is empty, got 1'),
    ({'cluster': 'h0:1', 'task': _task()},
     r'TF_CONFIG\["cluster"\] must be an object.*got "h0:1"'),
    ({'cluster': CHIEF_STYLE, 'task': _task(), 'session_master': 5},
     r'TF_CONFIG\["session_master"\] must be a string, got 5'),
]


@pytest.mark.parametrize('tf_config, message', MALFORMED,
                         ids=['case%02d' % i for i in range(len(MALFORMED))])
def test_malformed_tf_config_names_key_and_value(tf_config, message):
  with pytest.raises(ValueError, match=message):
    ClusterConfig.from_tf_config(_env(tf_config))


def test_at_least_fifteen_malformed_cases():
  assert len(MALFORMED) >= 15


def test_start_server_on_loopback():
  ports = test_util.pick_unused_ports(2)
  cluster = {'worker': ['127.0.0.1:%d' % ports[0]], 'ps': ['127.0.0.1:%d' % ports[1]]}
  config = ClusterConfig.from_tf_config(
      _env({'cluster': cluster, 'task': {'type': 'worker', 'index': 0}}))
  server = config.start_server()
  assert config.start_server() is server
  assert server.target == 'grpc://127.0.0.1:%d' % ports[0]
  assert config.master == server.target


def _shards_of_every_training_task(cluster):
  """{task name: the files it reads} over the training tasks of `cluster`."""
  files = ['records-%05d' % i for i in range(12)]
  read = {}
  for job in ('chief', 'master', 'worker'):
    for index in range(len(cluster.get(job, []))):
      config = ClusterConfig.from_tf_config(
          _env({'cluster': cluster, 'task': {'type': job, 'index': index}}))
      num_shards, place = config.input_shard
      read['%s%d' % (job, index)] = input_reader_builder.shard_files(files, num_shards, place)[0]
  return files, read


@pytest.mark.parametrize('cluster', [
    CHIEF_STYLE, MASTER_STYLE, {'worker': ['h1:1', 'h2:1', 'h3:1'], 'ps': ['h4:1']},
    dict(CHIEF_STYLE, worker=['h%d:1' % i for i in range(5, 10)])], ids=[
        'chief+2', 'master+1', 'workers only', 'chief+5'])
def test_training_tasks_read_every_input_file_once(cluster):
  # By construction: none empty, none shared, none unread (the chief and worker 0
  # used to read the same files, and the last place nobody).
  files, read = _shards_of_every_training_task(cluster)
  assert all(read.values()), read
  every_read = [f for part in read.values() for f in part]
  assert sorted(every_read) == files, read


def test_a_joined_worker_reads_the_place_of_the_grown_list():
  grown = dict(CHIEF_STYLE, worker=CHIEF_STYLE['worker'] + ['h9:2222'])
  joiner = ClusterConfig.from_tf_config(_env({'cluster': grown,
                                              'task': {'type': 'worker', 'index': 2}}))
  assert joiner.input_shard == (4, 3)


@pytest.mark.parametrize('task_type', ['ps', 'evaluator'])
def test_tasks_that_do_not_train_have_no_input_place(task_type):
  cluster = dict(CHIEF_STYLE, evaluator=['h8:2222'])
  config = ClusterConfig.from_tf_config(_env({'cluster': cluster,
                                              'task': {'type': task_type, 'index': 0}}))
  assert config.input_shard == (1, 0)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
