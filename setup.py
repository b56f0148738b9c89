"""Installs slimtrain; compiles protos/*.proto to *_pb2.py while building.

Also installs `slimtrain_tf_slim_hook.pth` into site-packages (see
slimtrain_tf_slim_hook.py): a program that imports tf_slim without importing
slimtrain still gets core.compat's fixes. setuptools has no option that puts a
file at the top of site-packages in both install kinds, so build_py writes it:
into build_lib for a wheel or `pip install .` (whose top is site-packages), and
for `pip install -e .` into the editable wheel being assembled, which is
installed from the top as it is.
"""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

_ROOT = os.path.dirname(os.path.abspath(__file__))
HOOK_PTH = 'slimtrain_tf_slim_hook.pth'
# One line: site.py runs `import` lines of a .pth file at interpreter start.
HOOK_PTH_LINE = 'import slimtrain_tf_slim_hook; slimtrain_tf_slim_hook.install()\n'


class BuildPyWithProtos(build_py):
  """Compiles the protos into the source tree before the usual build_py."""

  def run(self):
    sys.path.insert(0, os.path.join(_ROOT, 'protos'))
    import compile_protos  # pylint: disable=import-outside-toplevel
    compile_protos.compile_all()
    super().run()
    self._write_hook_pth()

  def _hook_pth_dir(self):
    """Where the .pth goes: the top of what lands in site-packages."""
    if getattr(self, 'editable_mode', False):
      # setuptools' editable_wheel points `install_lib` at the wheel it is
      # assembling; the editable strategies ship nothing else of build_lib.
      return self.get_finalized_command('install').install_lib
    return self.build_lib

  def _write_hook_pth(self):
    path = os.path.join(self._hook_pth_dir(), HOOK_PTH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as pth:
      pth.write(HOOK_PTH_LINE)

  def get_outputs(self, include_bytecode=True):
    outputs = super().get_outputs(include_bytecode=include_bytecode)
    if not getattr(self, 'editable_mode', False):
      outputs.append(os.path.join(self.build_lib, HOOK_PTH))
    return outputs


setup(
    name='slimtrain',
    version='0.1.0',
    description=('Distributed multi-GPU training in the TF-Slim model_deploy / '
                 'Object Detection legacy-trainer lineage, on TensorFlow 2.21'),
    python_requires='>=3.11',
    # `trainer.estimator` (the estimator package's old address) is an import alias
    # that trainer/__init__.py keeps, not a package of its own.
    packages=['protos', 'deployment', 'core', 'builders', 'models', 'trainer',
              'estimator', 'estimator.canned', 'estimator.export', 'tools', 'utils'],
    # Imported by slimtrain_tf_slim_hook.pth at interpreter start: os and sys only.
    py_modules=['slimtrain_tf_slim_hook'],
    package_data={'protos': ['*.proto']},
    install_requires=[
        # GPU users: pip install 'tensorflow[and-cuda]==2.21.*' first.
        'tensorflow==2.21.*',
        'tf-slim==1.1.0',
        'tf-keras==2.21.*',
        'numpy',
        'protobuf',
        'absl-py',
        'pycocotools',
        # Class names and scores drawn on the evaluator's and the demo's pictures.
        'Pillow',
        # deployment/tfjob.py writes and reads Kubernetes manifests.
        'pyyaml',
    ],
    extras_require={
        # grpcio-tools: the Makefile recompiles protos in place for the editable checkout.
        # jsonschema: tests/deployment/k8s_schema.py checks manifests against the Kubernetes
        # schemas; kubernetes-validate ships those schemas (tools/strip_k8s_schemas.py).
        'test': ['pytest', 'pytest-xdist', 'ruff', 'grpcio-tools', 'pandas', 'jsonschema',
                 'kubernetes-validate'],
        # tfe.inputs.pandas_input_fn.
        'pandas': ['pandas'],
    },
    cmdclass={'build_py': BuildPyWithProtos},
)
