"""Workers joining and leaving a running job: the pieces, with real in-process gRPC servers.

The multi-process behaviour (a `python -m trainer.train` worker joins, leaves on SIGTERM,
is killed) is in tests/trainer/test_cluster_elastic.py; here each piece runs against
servers of this process: the resize-aware cluster check, a joining worker's server and
sessions (the ps was started without it), the chief's membership log, and the ps's count
of workers at the end of a job.
"""

import sys
import time

import pytest
import tensorflow as tf

from deployment import cluster_check
from deployment import cluster_runtime
from deployment import elastic
from deployment import exit_codes
from tests import cluster_util


_config = cluster_util.cluster_config
_addresses = cluster_util.loopback_addresses


@pytest.fixture(scope='module')
def running_job():
  """Chief, ps and one worker address; chief and ps servers up, the cluster published."""
  chief, ps, worker, new_worker = _addresses(4)
  cluster = {'chief': [chief], 'ps': [ps], 'worker': [worker]}
  _config(cluster, 'ps').start_server()
  chief_config = _config(cluster, 'chief')
  cluster_check.start_server_and_agree(chief_config, timeout_secs=10)
  return {'cluster': cluster, 'chief': chief_config, 'new_worker': new_worker}


def _grown(job):
  return dict(job['cluster'], worker=job['cluster']['worker'] + [job['new_worker']])


def test_worker_list_change_names_growth_and_shrinking_only():
  two = {'chief': ['a:1'], 'worker': ['b:1', 'c:1']}
  assert cluster_check.worker_list_change(
      dict(two, worker=['b:1', 'c:1', 'd:1']), two) == 'job "worker" grew from 2 to 3 task(s)'
  assert cluster_check.worker_list_change(
      dict(two, worker=['b:1']), two) == 'job "worker" shrank from 2 to 1 task(s)'
  assert cluster_check.worker_list_change({'chief': ['a:1']}, two) == (
      'job "worker" shrank from 2 to 0 task(s)')
  assert cluster_check.worker_list_change(two, two) is None
  # A worker that moved is no resize: the same index names another task.
  assert cluster_check.worker_list_change(dict(two, worker=['b:1', 'x:1', 'd:1']), two) is None


def test_a_grown_worker_list_is_accepted_only_when_resizable(running_job):
  config = _config(_grown(running_job), 'worker', 1)
  chiefs = cluster_check.read_chiefs_cluster(config, 10)
  assert cluster_check.compare_with_chief(config, chiefs, resizable=True) == (
      'job "worker" grew from 1 to 2 task(s)')
  with pytest.raises(cluster_check.ClusterMismatchError) as error:
    cluster_check.compare_with_chief(config, chiefs, resizable=False,
                                     fixed_workers_reason='replicas_to_aggregate is fixed')
  message = str(error.value)
  assert 'job "worker" has 2 task(s) here and 1 at the chief' in message
  assert 'replicas_to_aggregate is fixed' in message
  assert 'task worker:1' in message


def test_a_different_ps_list_is_refused_even_when_resizable(running_job):
  other = dict(_grown(running_job), ps=['127.0.0.1:1'])
  config = _config(other, 'worker', 1)
  with pytest.raises(cluster_check.ClusterMismatchError) as error:
    elastic.start_worker_server(config, 10, resizable=True)
  message = str(error.value)
  assert ('job "ps" task 0: this task has 127.0.0.1:1, the chief has %s'
          % running_job['cluster']['ps'][0]) in message
  assert 'only the worker list of a resizable job may differ' in message
  assert not config.is_joining


def test_a_joining_worker_shares_the_ps_variables_with_the_chief(running_job):
  """The ps never heard of worker 1, yet receives a tensor computed there."""
  chief = running_job['chief']
  with tf.Graph().as_default():
    with tf.compat.v1.device('/job:ps/task:0'):
      total = tf.compat.v1.get_variable('elastic_total', shape=[], use_resource=True,
                                        initializer=tf.compat.v1.zeros_initializer())
    with tf.compat.v1.Session(chief.master, config=chief.session_config()) as session:
      session.run(total.initializer)
      session.run(total.assign_add(1.0))

  joiner = _config(_grown(running_job), 'worker', 1)
  server, joining = elastic.start_worker_server(joiner, 10, resizable=True)
  assert joining and joiner.is_joining
  assert server.target == joiner.master
  with tf.Graph().as_default():
    with tf.compat.v1.device('/job:ps/task:0'):
      total = tf.compat.v1.get_variable('elastic_total', shape=[], use_resource=True,
                                        initializer=tf.compat.v1.zeros_initializer())
    with tf.compat.v1.device('/job:worker/task:1'):
      two = tf.constant(1.0) + tf.constant(1.0)  # runs on the joiner, sent to the ps
    update = total.assign_add(two)
    config = joiner.session_config()
    assert config.cluster_def.job
    assert config.experimental.share_session_state_in_clusterspec_propagation
    with tf.compat.v1.Session(joiner.master, config=config) as session:
      assert session.run(update) == 3.0
  with tf.Graph().as_default():
    with tf.compat.v1.device('/job:ps/task:0'):
      total = tf.compat.v1.get_variable('elastic_total', shape=[], use_resource=True)
    with tf.compat.v1.Session(chief.master, config=chief.session_config()) as session:
      assert session.run(total.value()) == 3.0


def test_two_workers_joining_together_keep_their_sessions(running_job):
  """A ps drops the sessions of a master name that reappears; each joiner has its own."""
  new = _addresses(2)
  cluster = dict(running_job['cluster'],
                 worker=running_job['cluster']['worker'] + [running_job['new_worker']] + new)
  joiners = [_config(cluster, 'worker', index) for index in (2, 3)]
  runs = []  # (session, ops) per joiner, each in its own graph as in its process
  try:
    for joiner in joiners:
      assert elastic.start_worker_server(joiner, 10, resizable=True)[1]
      with tf.Graph().as_default() as graph:
        with tf.compat.v1.device('/job:ps/task:0'):
          total = tf.compat.v1.get_variable('together_total', shape=[], use_resource=True,
                                            initializer=tf.compat.v1.zeros_initializer())
        with tf.compat.v1.device('/job:worker/task:%d' % joiner.task_index):
          one = tf.constant(2.0) - tf.constant(1.0)
        ops = {'init': total.initializer, 'update': total.assign_add(one),
               'value': total.value()}
        runs.append((tf.compat.v1.Session(joiner.master, graph=graph,
                                          config=joiner.session_config()), ops))
    runs[0][0].run(runs[0][1]['init'])
    for _ in range(3):  # the first joiner's session outlives the second's creation
      for session, ops in runs:
        session.run(ops['update'])
    assert runs[0][0].run(runs[0][1]['value']) == 6.0
  finally:
    for session, _ in runs:
      session.close()


def test_the_chief_logs_joins_and_leaves_with_the_worker_count(running_job):
  chief = running_job['chief']
  members = elastic.MembershipLog(chief, chief.master)
  assert members.members == {0}
  lines = []
  original_record = members.record
  members.record = lambda message: lines.append(original_record(message))
  members.start()
  try:
    joiner = _config(_grown(running_job), 'worker', 1)
    original = _config(running_job['cluster'], 'worker', 0)
    assert elastic.announce(original, elastic.JOINED)   # counted already: no line
    assert elastic.announce(joiner, elastic.JOINED)
    assert elastic.announce(joiner, elastic.LEFT)
    deadline = time.time() + 30
    while len(lines) < 3 and time.time() < deadline:
      time.sleep(0.1)
  finally:
    members.stop()
  assert lines == [None, 'worker:1 joined (2 workers)', 'worker:1 left (1 workers)']
  assert members.members == {0}


def test_announce_to_an_absent_chief_returns_false_at_once():
  chief, worker = _addresses(2)
  config = _config({'chief': [chief], 'worker': [worker]}, 'worker')
  start = time.time()
  assert not elastic.announce(config, elastic.LEFT)
  assert time.time() - start < 5


def _tokens(num_workers):
  cluster = {'chief': ['a:1'], 'ps': ['p:1'],
             'worker': ['w:%d' % (i + 1) for i in range(num_workers)]}
  return cluster_runtime._DoneTokens(_config(cluster, 'ps'), chief_timeout_secs=300,
                                     termination_grace_secs=25)


def test_the_ps_counts_a_worker_that_left_as_done_and_waits_for_a_joiner():
  tokens = _tokens(2)
  tokens.add(2, cluster_runtime.JOINED, b'')           # worker 2 joined the job
  tokens.add(1, cluster_runtime.PREEMPTED, b'')        # worker 1 removed by SIGTERM
  tokens.add(-1, cluster_runtime.FINISHED, b'')
  tokens.add(0, cluster_runtime.FINISHED, b'')
  assert tokens.exit_code() is None                    # the joiner is still training
  tokens.add(2, cluster_runtime.FINISHED, b'')
  assert tokens.exit_code() == exit_codes.DONE


def test_a_worker_back_after_leaving_is_waited_for_again():
  tokens = _tokens(1)
  tokens.add(0, cluster_runtime.PREEMPTED, b'')
  tokens.add(0, cluster_runtime.JOINED, b'')           # restarted, training again
  tokens.add(-1, cluster_runtime.FINISHED, b'')
  assert tokens.exit_code() is None
  tokens.add(0, cluster_runtime.FINISHED, b'')
  assert tokens.exit_code() == exit_codes.DONE


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
