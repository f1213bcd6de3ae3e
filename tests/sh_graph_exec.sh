#!/bin/sh
# The graph executor against the serial run and PyTorch's recorded losses (tests/graph_exec.py; docs/executor.md
# "ONNX graphs"). Usage: sh tests/sh_graph_exec.sh BIN
exec python3 "$(dirname "$0")/graph_exec.py" "${1:-bin/autopar}"
