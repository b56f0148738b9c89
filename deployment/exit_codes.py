"""The exit-code contract every slimtrain command line follows.

A cluster scheduler decides from a task's exit code whether restarting it can
help. Kubeflow's TFJob with `restartPolicy: ExitCode` treats 1-127 as
permanent and 128-255 as retryable; slimtrain's codes are chosen to fit:

| code    | meaning                                                           |
| ------- | ----------------------------------------------------------------- |
| 0       | done: training (or evaluation, export) finished                   |
| 143     | preempted: SIGTERM arrived and the chief wrote a checkpoint       |
| 1-127   | permanent: bad config or flag, NaN loss, checkpoint of another    |
|         | model; a restart runs into the same error                         |
| 128-255 | retryable (143 aside): a peer unreachable past its timeout, a     |
|         | sync replica missing, recovery timed out, the chief lost          |

Usage:

    from deployment import exit_codes

    try:
      train(...)
    except cluster_errors.PeerLostError:
      sys.exit(exit_codes.RETRYABLE)

    if exit_codes.is_retryable(returncode):
      restart()
"""

DONE = 0
# Bad input, NaN loss, a checkpoint that does not fit: retrying cannot help.
PERMANENT = 1
# 128 + SIGTERM: what a shell reports for a task ended by SIGTERM, so a task
# that saved and then exited looks to schedulers like the termination it was.
PREEMPTED = 143
# A peer (ps, chief, sync replica) was lost past its timeout; a restart of the
# task (or the job) resumes from the last checkpoint. Any code in 128-255
# other than 143 means "retryable"; this is the one slimtrain uses itself.
RETRYABLE = 129


def is_retryable(code):
  """Whether a restart can help a task that exited with `code`.

  Args:
    code: the process exit code (an int; negative values are how Python's
      subprocess reports death by signal N, which counts as 128 + N).

  Returns:
    True for 128-255 other than 143 (preempted tasks are restarted by the
    scheduler as a whole job, not as a failure).
  """
  code = normalize(code)
  return 128 <= code <= 255 and code != PREEMPTED


def is_permanent(code):
  """Whether `code` is a failure that a restart cannot fix (1-127)."""
  return 1 <= normalize(code) <= 127


def normalize(code):
  """Maps subprocess's `-N` (killed by signal N) to the shell's `128 + N`."""
  return 128 - code if code < 0 else code
