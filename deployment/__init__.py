"""Deployment: where each part of a training step runs, and who does what in a cluster.

Start with `model_deploy.py` (TF-Slim's `DeploymentConfig`, `create_clones`,
`optimize_clones`, `deploy`).

Map:

* `model_deploy.py`: clones on devices, gradients summed on the variables
  device, variables on parameter servers; `clone_batch.py`: how much of a
  batch each clone gets (the one divisibility check of both training paths).
* `device_setters.py`: the device functions that place variables on ps tasks
  (round robin or greedy by size, resource variables included).
* `replicated.py`: `variable_update='replicated'`, one copy of the model per
  clone kept equal by all-reduce.
* `cluster.py`: TF_CONFIG -> `ClusterConfig` (cluster spec, task, chief,
  server); `cluster_check.py`: at startup every task checks that its cluster
  is the chief's (published on the chief's server); `exit_codes.py`: what
  each process exit status means and which failures are retryable
  (`classify`, `main_with_exit_codes` around every command line);
  `startup_checks.py`: the chief's check that it can write its directory.
* `cluster_runtime.py`: what a cluster task does besides training: wait for
  the ps tasks and the chief at startup, the ps serving loop, and the one
  "training done" signal both workflows (`trainer.train`, the Estimator's
  `train_and_evaluate`) send to the ps tasks.
* `elastic.py`: workers that join and leave a running ps job (a joiner's
  server and sessions, the chief's membership log).
* `sync_replicas.py`: a `SyncReplicasOptimizer` whose chief stops cleanly
  after the last step and releases the workers, and whose replica counts
  the chief may change while the job runs (`ReplicaResizer`).
* `launch.py`: `python -m deployment.launch`, a whole cluster as local
  processes (restart policies, merged log, SIGTERM forwarding), also from a
  TFJob or JobSet manifest; `tfjob.py`: writes Kubernetes manifests (TFJob,
  or a JobSet from `jobset.py`, both around the pods of `k8s_pods.py`, with
  the repeated flags parsed by `k8s_flags.py` and the ps memory and steps a
  readable config gives from `k8s_sizes.py`) and reads TFJobs;
  `launch_resize.py`: the launcher adds (SIGUSR1) and removes (SIGUSR2)
  workers of a running job;
  `replicas.py`: replica types, restart policies, the operator's TF_CONFIG;
  `ports.py`: free loopback ports.
* `fault_runtime.py`: the one fault runtime of a training task, used by
  both training paths (tf-slim's loop in `trainer.training_loop`, the
  Estimator's `MonitoredSession` loop in `monitored_training.py`): its
  settings (`FaultSettings`, from deploy_config or a RunConfig),
  `TaskFaults`, the `BoundedSession` steps run through, the ps loop and the
  exit exceptions. Its pieces: `fault_tolerance.py` (bounded shutdown after
  SIGTERM: watchdog, a thread that hears the signal during a blocked run; the
  recovery deadline after a lost peer), `step_watch.py` (steps that stop
  finishing), `replica_watch.py` (sync replicas' delivery stamps, heartbeats
  and the monitor that names a missing replica).
* `netns.py`: a private network of Linux network namespaces, one per task,
  with link partitions (the multi-host test harness; benchmarks use it too).
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
