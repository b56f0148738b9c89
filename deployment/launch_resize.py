"""Adding and removing workers of a job that `deployment.launch` runs, while it runs.

A ps job of the legacy trainer accepts workers that join and leave (deployment/elastic.py). The
local launcher does for its job what raising or lowering `replicas` does on Kubernetes,
driven by two signals to the launcher process:

    python -m deployment.launch --chief --workers=1 --ps=1 -- \\
        --pipeline_config_path=configs/ssd_shapes.config --train_dir=/tmp/train &
    kill -USR1 $!   # [launch] adding worker:1 at 127.0.0.1:41233 (2 workers)
    kill -USR2 $!   # [launch] removing worker:1 (SIGTERM; 1 workers)

SIGUSR1 adds one worker: the next index, a free loopback port (the same one again when
that index ran before, as a Kubernetes pod keeps its name), and a TF_CONFIG listing
the job's tasks plus it. The running tasks keep the TF_CONFIG they started with.
SIGUSR2 removes the worker with the highest index (what a scale-down removes): it gets
SIGTERM and its exit, whatever the code, neither restarts it nor ends the job; one still
running --grace_secs later is SIGKILLed. From Python: `launcher.request_resize(+1)`
or `(-1)`, safe from a thread or a signal handler.

Differs on purpose from the TFJob operator, which recreates the pods of a changed
`replicas` through its reconcile loop: here one request changes one worker, and the
launcher refuses (logging why) what it cannot do: adding without a worker replica type,
on --netns, or while the job stops; removing worker 0 of a job without a chief (it is
the chief).
"""

import collections
import signal
import time

from deployment import ports
from deployment import replicas as replicas_lib

# Signal -> change in the number of workers.
RESIZE_SIGNALS = {signal.SIGUSR1: +1, signal.SIGUSR2: -1}


class ResizeMixin(object):
  """The launcher's worker adding and removing; mixed into `launch.Launcher`."""

  def _init_resize(self):
    self._resize_requests = collections.deque()
    self._removed = {}  # (type, index) -> monotonic time of its SIGKILL
    self._spare_addresses = {}

  def request_resize(self, delta):
    """Asks for one worker more (+1) or fewer (-1); applied by the launcher's loop.

    Args:
      delta: +1 or -1.
    """
    if delta not in (1, -1):
      raise ValueError('request_resize takes +1 or -1, got %r' % (delta,))
    self._resize_requests.append(delta)

  def _apply_resizes(self):
    """Applies the resize requests that arrived since the last poll; SIGKILLs late leavers."""
    now = time.monotonic()
    for task in self._tasks:
      if task.running and self._removed.get(task.key, now + 1) <= now:
        self.log('%s still running %.0fs after its removal: SIGKILL' % (
            task.name, self._grace_secs))
        self._signal(task, signal.SIGKILL)
        self._removed[task.key] = float('inf')
    while self._resize_requests:
      if self._resize_requests.popleft() > 0:
        self._add_worker()
      else:
        self._remove_worker()

  def _worker_spec(self):
    return next((s for s in self._specs if s.replica_type == 'worker'), None)

  def _set_workers(self, addresses):
    # A new dict in the same key order: the running tasks keep their own TF_CONFIG.
    self._cluster = {job: (list(addresses) if job == 'worker' else tasks)
                     for job, tasks in self._cluster.items()}

  def _add_worker(self):
    """Starts a worker at the next index with a TF_CONFIG listing it."""
    spec = self._worker_spec()
    if spec is None or self._network is not None or self._outcome is not None:
      self.log('cannot add a worker: %s' % (
          'the job has no worker replica type' if spec is None else
          '--netns jobs have a fixed set of namespaces' if self._network is not None
          else 'the job is stopping'))
      return
    workers = self._cluster['worker']
    index = len(workers)
    if any(t.running for t in self._tasks if t.key == ('worker', index)):
      self.log('cannot add a worker: worker:%d is still leaving; ask again once it exited'
               % index)
      return
    address = self._spare_addresses.pop(index, None) or ports.loopback_addresses(1)[0]
    self._set_workers(workers + [address])
    self._tasks = [t for t in self._tasks if t.key != ('worker', index)]
    task = self._new_task(spec, index, replicas_lib.tf_config(self._cluster, 'worker', index))
    self._tasks.append(task)
    self.log('adding worker:%d at %s (%d workers)' % (index, address, index + 1))
    self._start(task)

  def _remove_worker(self):
    """SIGTERMs the worker with the highest index and drops it from later TF_CONFIGs."""
    workers = self._cluster.get('worker', [])
    index = len(workers) - 1
    if index < 0 or self._outcome is not None or (
        index == 0 and self._success_key == ('worker', 0)):
      self.log('cannot remove a worker: %s' % (
          'no worker left' if index < 0 else 'the job is stopping'
          if self._outcome is not None else 'worker:0 is the chief of this job'))
      return
    task = next(t for t in self._tasks if t.key == ('worker', index))
    self._spare_addresses[index] = workers[index]
    self._set_workers(workers[:-1])
    self._removed[task.key] = time.monotonic() + self._grace_secs
    task.restart_at = None
    self.log('removing worker:%d (SIGTERM; %d workers)' % (index, index))
    if task.running:
      self._signal(task, signal.SIGTERM)

  def _removed_exit(self, task, code):
    """Whether `task` was removed: its exit is then logged and nothing else."""
    if task.key not in self._removed:
      return False
    del self._removed[task.key]
    self.log('%s removed: exited with code %d' % (task.name, code))
    return True
