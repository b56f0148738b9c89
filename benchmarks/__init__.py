"""Throughput and scaling benchmarks of slimtrain (not tests); results in RESULTS.md.

Map:

* `overhead.py`: the framework's per-step cost against a bare Session loop;
  `overhead_paired.py`: the same in interleaved bursts of both within one run,
  so the machine's drifting speed reaches both alike.
* `input_pipeline.py`: BatchQueue + prefetch against a plain tf.data pipeline.
* `clone_scaling.py`: images/sec with 1, 2 and 4 clones per variable_update mode.
* `distributed.py`: 1 and 2 workers with a ps on loopback, sync and async.
* `gpu_throughput.py`: ResNet-50 training throughput on one GPU.
* `gpu_check.py` (`gpu_check.sh`): the whole GPU check in one command, at most 9
  minutes, with a CPU `--dry-run`; its training steps are in `gpu_check_steps.py`.
* `scaling_model.py`: predicts ps / all-reduce scaling from variable sizes, compute
  time and link speed (equations in `scaling_equations.py`); `--calibrate` freezes
  this machine's parameters into `scaling_params.json` (`scaling_params.py`) and
  `--validate` compares real clusters with the frozen predictions
  (`scaling_validate.py`; clusters, link probes and `tc` limits in `scaling_check.py`:
  1-4 workers x 1-2 ps, loopback or one network namespace per task).
* `elastic_ps_memory.py`: a ps's memory, threads and descriptors while 50 workers
  join and leave a running job (issue 29; a measurement, no threshold).
* `elastic.py`: an asynchronous `trainer.train` job (chief + 2 ps) whose workers go
  1 -> 3 -> 2 -> 4 -> 1 ... every 30 s, and a churn run (one join or leave every 10 s),
  on loopback or `--netns`: steps/sec over time, the longest gap between global steps at
  each change, examples/sec per task after each change vs a job started at that size,
  restarts of the other tasks, the loss vs a fixed-size job (log parsing in
  `elastic_timeline.py`; starts its tasks with tests/cluster_util.py).
* `ps_failover.py`: a ps of an asynchronous job (chief, 2 workers, 2 ps; ResNet-50,
  ~94 MB over both ps) killed and restarted every 30 s: per kill the time to the next
  global step, the restored shard's source and age, the kept shard, the global-step
  rollback and the loss around it, with snapshots and against checkpoint restores
  (issue 28; reuses `elastic.py`'s job; log patterns and the report, without flags,
  in `ps_failover_report.py`).
* `bench_util.py`: the timing protocol, tables, synthetic data and models they share.
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
