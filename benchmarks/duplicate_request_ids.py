r"""How often TensorFlow refuses a step of a healthy ps job as a repeated request id.

A worker service remembers the ids of the last 100000 requests it served and
refuses a request whose id it has seen (`AbortedError: The same RunGraph
(Worker) request was received twice`), to catch a request that a gRPC retry
delivered twice. The master draws each step's RunGraph ids from a random
generator that the step's own new thread seeds with 32 random bits, so after
some 10^5 steps two steps of a long job draw the same seed by chance and the
later one is refused, with no fault anywhere. tf-slim's Supervisor and
tf.estimator's `MonitoredSession` answer that error with a new session;
`deployment.fault_runtime.BoundedSession` runs the step again in the same
session (one cause of the "received twice" session restarts of issue 29).

One process holds a worker and a ps (loopback gRPC); a step adds a number the
worker computes to a variable on the ps (one RunGraph to each task). Every
step runs through a `BoundedSession`: each refusal it absorbed is one that a
plain session would have raised, so the run counts both at once.

    python -m benchmarks.duplicate_request_ids                # 300000 steps, 5-10 min
    python -m benchmarks.duplicate_request_ids --steps=20000  # smoke run; ~0 refusals
"""

import sys
import time

from absl import app
from absl import flags
import tensorflow as tf

from deployment import fault_runtime
from deployment import ports

flags.DEFINE_integer('steps', 300000, 'Steps to run.')
flags.DEFINE_integer('report_every', 50000, 'Print progress every this many steps.')
FLAGS = flags.FLAGS


def _servers():
  """A worker and a ps in this process: (worker target, servers)."""
  worker, ps = ports.pick_unused_ports(2)
  spec = tf.train.ClusterSpec({'worker': ['127.0.0.1:%d' % worker],
                               'ps': ['127.0.0.1:%d' % ps]})
  servers = [tf.distribute.Server(spec, job_name=job, task_index=0, start=True)
             for job in ('worker', 'ps')]
  return servers[0].target, servers


def run(steps, report_every, out=sys.stdout):
  """Runs `steps` steps; returns (refusals absorbed, steps at which they came, errors raised).

  Args:
    steps: steps to run.
    report_every: print a progress line every this many steps.
    out: where progress and the result go.
  """
  target, servers = _servers()  # noqa: F841  (the servers live as long as the run)
  with tf.Graph().as_default():
    with tf.compat.v1.device('/job:ps/task:0'):
      total = tf.compat.v1.get_variable('total', initializer=0.0, use_resource=True)
    with tf.compat.v1.device('/job:worker/task:0'):
      addend = tf.constant(1.0) * 2.0
    step = total.assign_add(addend).op
    # No deadlines (no settings): a refusal past the retries reaches the loop and is counted.
    session = fault_runtime.BoundedSession(tf.compat.v1.Session(target),
                                           fault_runtime.TaskFaults())
    session.run(total.initializer)
    refused_at, raised, start = [], 0, time.time()
    for index in range(1, steps + 1):
      before = session.duplicate_requests
      try:
        session.run(step)
      except tf.errors.OpError as e:
        raised += 1
        print('step %d raised %s' % (index, type(e).__name__), file=out)
      refused_at.extend([index] * (session.duplicate_requests - before))
      if index % report_every == 0:
        print('%d steps, %.0f s, refusals so far %d' % (index, time.time() - start,
                                                       len(refused_at)), file=out, flush=True)
    session.close()
  return len(refused_at), refused_at, raised


def main(argv):
  del argv
  tf.compat.v1.disable_eager_execution()
  start = time.time()
  count, refused_at, raised = run(FLAGS.steps, FLAGS.report_every)
  print('\n%d steps of a 1 worker + 1 ps session in %.0f s' % (FLAGS.steps,
                                                              time.time() - start))
  print('refused by TensorFlow as a repeated request id: %d (at steps %s)' % (
      count, ', '.join(str(s) for s in refused_at) or '-'))
  print('each one a new session under tf-slim\'s Supervisor or MonitoredSession; '
        'run again in the same session by BoundedSession; errors that reached the loop: %d'
        % raised)


if __name__ == '__main__':
  app.run(main)
