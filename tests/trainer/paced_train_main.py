"""`python -m trainer.train` whose training steps take at least `PACED_STEP_SECS` each.

Many cluster tests train "until told to stop" (`num_steps` far out of reach)
while they wait for something else to happen: a worker to join, a SIGTERM's
grace to pass, a killed ps to come back. Unpaced, their chief and workers
train flat out all that time: two or three processes take both cores of a
2-core test machine from the suite's other workers, for steps that no
assertion reads. Paced, a task sleeps after each step that took less than
the pace, so the job costs a fraction of the CPU while the steps a test waits
for still come many per second.

    PACED_STEP_SECS=0.05 python -u -m tests.trainer.paced_train_main \\
        --pipeline_config_path=... --train_dir=...

Everything else is `trainer.train` unchanged: the same flags, graph, runtime,
logs and exit codes. The sleep comes after the step has run, logged and
decided whether to stop, so a SIGTERM or a lost peer is seen as unpaced (at
most one pace later); a step that ends training returns at once.
"""

import os
import runpy
import time

from trainer import training_loop

PACE_ENV = 'PACED_STEP_SECS'


def paced(step_fn, pace_secs):
  """`TrainStepRunner.__call__` that returns no sooner than `pace_secs` after it began.

  Args:
    step_fn: the unbound `__call__` to wrap.
    pace_secs: the shortest time one step may take.

  Returns:
    The wrapped function.
  """

  def paced_step(self, *args):
    started = time.monotonic()
    loss, should_stop = step_fn(self, *args)
    left = pace_secs - (time.monotonic() - started)
    if left > 0 and not should_stop:
      time.sleep(left)
    return loss, should_stop

  return paced_step


if __name__ == '__main__':
  pace = float(os.environ.get(PACE_ENV) or 0)
  if pace > 0:
    training_loop.TrainStepRunner.__call__ = paced(training_loop.TrainStepRunner.__call__, pace)
  runpy.run_module('trainer.train', run_name='__main__', alter_sys=True)
