"""The exit-code contract: which codes a scheduler may retry."""

import signal
import subprocess
import sys

import pytest

from deployment import exit_codes


def test_contract_values_fit_tfjob_exit_code_policy():
  assert exit_codes.DONE == 0
  assert exit_codes.PREEMPTED == 128 + signal.SIGTERM
  assert exit_codes.is_permanent(exit_codes.PERMANENT)
  assert exit_codes.is_retryable(exit_codes.RETRYABLE)
  assert not exit_codes.is_retryable(exit_codes.PREEMPTED)
  assert not exit_codes.is_permanent(exit_codes.PREEMPTED)


@pytest.mark.parametrize('code,retryable,permanent', [
    (0, False, False), (1, False, True), (127, False, True), (128, True, False),
    (137, True, False), (143, False, False), (255, True, False),
    (-signal.SIGKILL, True, False), (-signal.SIGTERM, False, False)])
def test_classification(code, retryable, permanent):
  assert exit_codes.is_retryable(code) is retryable
  assert exit_codes.is_permanent(code) is permanent


def test_signal_death_reported_by_subprocess_normalizes_like_a_shell():
  proc = subprocess.run([sys.executable, '-c', 'import os, signal; os.kill(os.getpid(), 9)'],
                        check=False)
  assert proc.returncode == -signal.SIGKILL
  assert exit_codes.normalize(proc.returncode) == 137
  assert exit_codes.is_retryable(proc.returncode)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
