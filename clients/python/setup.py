"""Builds parity-client with its gRPC stubs (pyproject.toml holds the metadata).

The stubs are not in the source tree (build outputs stay in build/): build_py generates them from
the .proto files into the wheel, next to parity_client/, as CMake does into build/clients/python:
parity/v1/*_pb2.py, parity/v1/sweep_service_pb2_grpc.py and google/rpc/{status,error_details}_pb2.py.

The protos are found at $PARITY_PROTO_DIR, else ../../proto beside this file (a checkout: pip
builds in place). The compiler is Debian's protoc with grpc_python_plugin (protobuf-compiler-grpc;
its output matches python3-protobuf 3.21), else grpc_tools (pip install grpcio-tools), whose
output needs a protobuf at least as new as it.
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["google/rpc/status.proto", "google/rpc/error_details.proto",
          "parity/v1/model.proto", "parity/v1/training.proto", "parity/v1/accounting.proto",
          "parity/v1/sweep.proto", "parity/v1/run.proto", "parity/v1/worker.proto",
          "parity/v1/analysis.proto", "parity/v1/sweep_service.proto"]


def _proto_dir():
    path = os.environ.get("PARITY_PROTO_DIR") or os.path.join(HERE, "..", "..", "proto")
    if not os.path.isfile(os.path.join(path, "parity", "v1", "sweep_service.proto")):
        sys.exit(f"parity-client: no protos at {os.path.abspath(path)}: install from a checkout "
                 "(pip install clients/python) or set PARITY_PROTO_DIR to its proto/ directory")
    return os.path.abspath(path)


def _compiler():
    """The protoc command line prefix and its include directories."""
    protoc, plugin = shutil.which("protoc"), shutil.which("grpc_python_plugin")
    if protoc and plugin:
        includes = [d for d in ("/usr/include", "/usr/local/include")
                    if os.path.isfile(os.path.join(d, "google", "protobuf", "timestamp.proto"))]
        return [protoc, f"--plugin=protoc-gen-grpc_python={plugin}"], includes
    try:
        import grpc_tools
        from grpc_tools import protoc  # noqa: F401
    except ImportError:
        sys.exit("parity-client: generating the stubs needs protoc and grpc_python_plugin "
                 "(apt-get install protobuf-compiler protobuf-compiler-grpc) or grpcio-tools "
                 "(pip install grpcio-tools)")
    return [sys.executable, "-m", "grpc_tools.protoc"], [os.path.join(
        os.path.dirname(grpc_tools.__file__), "_proto")]


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        proto_dir = _proto_dir()
        command, includes = _compiler()
        out = os.path.abspath(self.build_lib)
        args = command + [f"--python_out={out}", f"--grpc_python_out={out}", f"-I{proto_dir}"]
        args += [f"-I{d}" for d in includes] + [os.path.join(proto_dir, p) for p in PROTOS]
        subprocess.run(args, check=True)
        # Only the service file needs its _grpc module; protoc writes an empty one per file.
        for p in PROTOS:
            stub = os.path.join(out, p.replace(".proto", "_pb2_grpc.py"))
            if not p.endswith("sweep_service.proto") and os.path.exists(stub):
                os.remove(stub)


setup(cmdclass={"build_py": BuildPyWithStubs})
