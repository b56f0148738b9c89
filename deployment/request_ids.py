"""TensorFlow's refusal of a repeated request id, which a long job meets by chance.

A worker service remembers the ids of the last 100000 requests it served and
refuses one it has seen, with `AbortedError: The same RunGraph (Worker)
request was received twice` (or `RecvTensor`, ...). It is meant to catch a
request that a gRPC retry delivered twice. But the master draws each step's
RunGraph ids from a random generator that the step's own new thread seeds
with 32 random bits, so after some 10^5 steps two steps of any long job draw
the same seed, and the later one is refused with no fault anywhere
(`benchmarks/duplicate_request_ids.py`: 5 in 300000 steps of a plain 1 worker
+ 1 ps session). Nothing of such a step ran on the task that refused it, and
the step's other parts wait on that part, so the step can simply run again:
its new thread draws new ids. (After a request TensorFlow did resend, its
first copy may have run; running the step again then adds at most one step
of this worker, as a new session would have.)

    try:
      session.run(poll)
    except tf.errors.AbortedError as e:
      if not request_ids.is_duplicate_request(e):
        raise
      # run it again next time round

`deployment.fault_runtime.BoundedSession` does this for the training steps of
both training paths (up to `RETRIES` times in a row); the ps loop and the
chief's membership log, which poll for as long as the job runs, do it too.

Differs on purpose from the originals: tf-slim's Supervisor and
tf.estimator's `MonitoredSession` answer the refusal with a new session, and
a ps or chief poll loop would end.
"""

import re

import tensorflow as tf

# The words every such refusal carries.
DUPLICATE_REQUEST = 'request was received twice'
# Refusals of one run in a row before it is taken for a real fault: one is one
# in tens of thousands, a fourth in a row is no longer chance.
RETRIES = 3


def is_duplicate_request(error):
  """Whether `error` is a worker service refusing a request id it had seen.

  Args:
    error: an exception from `Session.run`.

  Returns:
    True for TensorFlow's `AbortedError` "The same ... request was received twice".
  """
  return (isinstance(error, tf.errors.AbortedError)
          and DUPLICATE_REQUEST in (getattr(error, 'message', '') or ''))


def what_was_refused(error):
  """The sentence of a refusal's message that names the request (for a log line).

  TensorFlow puts other lines ("Graph execution error:", the task) first.

  Args:
    error: an exception for which `is_duplicate_request` is True.

  Returns:
    e.g. "The same RunGraph (Worker) request was received twice"; else the
    message's first 200 characters.
  """
  message = getattr(error, 'message', None) or str(error)
  said = re.search(r'The same [^\n]*?%s' % DUPLICATE_REQUEST, message)
  return said.group(0) if said else message.strip()[:200]
