"""Protocol buffer messages of the pipeline config.

The `*_pb2.py` modules are generated from the `.proto` files beside this file
when the package is installed (`pip install .` runs `protos/compile_protos.py`);
they are never committed. Import them as `from protos import pipeline_pb2`.
"""
