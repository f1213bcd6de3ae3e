#!/usr/bin/env python3
"""Writes hostile and large ONNX files for the reliability tests (issue 19, classes 2, 4 and 6), straight in
the protobuf wire format with nothing but the standard library, so that `make test` needs neither onnx nor
protobuf in Python. Field numbers are those of onnx.proto (Debian's libonnx-dev copy, onnx 1.13):
ModelProto ir_version=1 opset_import=8 graph=7; GraphProto node=1 name=2 initializer=5 input=11 output=12;
NodeProto input=1 output=2 name=3 op_type=4 attribute=5; AttributeProto name=1 i=3 g=6 type=20;
TensorProto dims=1 data_type=2 name=8 raw_data=9; ValueInfoProto name=1 type=2; TypeProto tensor_type=1;
TypeProto.Tensor elem_type=1 shape=2; TensorShapeProto dim=1; Dimension dim_value=1; OperatorSetIdProto
version=2.

Usage: gen_onnx.py KIND OUT [ARGS]
  nested-if N OUT          N If nodes, each holding the next in its then_branch subgraph
  nested-type N OUT        a graph input whose type is a sequence of a sequence ... N deep
  chain N OUT              x [2, 8] float through N Relu nodes in a chain
  conv G WCH OUT           Conv of x [1, 4, 8, 8] with weight [8, WCH, 3, 3] (raw data) and group G
  raw-short OUT            a MatMul whose weight initializer has 4 bytes fewer raw_data than its dims need
  dims D0 D1 OUT           x [D0, D1] through a MatMul with an external weight W [D1, 4] (hostile numbers)
  init-dims D0 D1 OUT      x [2, 8] through a MatMul with an external weight W [D0, D1]
"""
import sys

FLOAT, INT64 = 1, 7
ATTR_INT, ATTR_GRAPH = 2, 5


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def f_int(field, v):
    return key(field, 0) + varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return key(field, 2) + varint(len(b)) + b


def value_info(name, et, dims):
    shape = b"".join(f_bytes(1, f_int(1, d)) for d in dims)
    tensor_type = f_int(1, et) + f_bytes(2, shape)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor_type))


def node(op, ins, outs, name="", attrs=b""):
    b = b"".join(f_bytes(1, i) for i in ins) + b"".join(f_bytes(2, o) for o in outs)
    if name:
        b += f_bytes(3, name)
    return b + f_bytes(4, op) + attrs


def attr_int(name, v):
    return f_bytes(5, f_bytes(1, name) + f_int(3, v) + f_int(20, ATTR_INT))


def tensor(name, dims, et, raw):
    return b"".join(f_int(1, d) for d in dims) + f_int(2, et) + f_bytes(8, name) + f_bytes(9, raw)


def model(graph):
    return f_int(1, 7) + f_bytes(8, f_int(2, 14)) + f_bytes(7, graph)


def graph(nodes, inputs=(), outputs=(), inits=(), name="g"):
    return (b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name) + b"".join(f_bytes(5, t) for t in inits)
            + b"".join(f_bytes(11, v) for v in inputs) + b"".join(f_bytes(12, v) for v in outputs))


def nested_if(n):
    g = graph([node("Relu", ["x"], ["y"])], name="leaf")
    for i in range(n):
        branch = f_bytes(5, f_bytes(1, "then_branch") + f_bytes(6, g) + f_int(20, ATTR_GRAPH))
        g = graph([node("If", ["c"], ["y"], "if%d" % i, branch)], name="g%d" % i)
    return model(g)


def nested_type(n):
    t = f_bytes(1, f_int(1, FLOAT))  # TypeProto{tensor_type{elem_type}}
    for _ in range(n):
        t = f_bytes(4, f_bytes(1, t))  # TypeProto{sequence_type{elem_type = t}}
    return model(graph([node("Relu", ["x"], ["y"])], [f_bytes(1, "x") + f_bytes(2, t)]))


def chain(n):
    nodes = [node("Relu", ["x" if i == 0 else "t%d" % (i - 1)], ["t%d" % i], "r%d" % i) for i in range(n)]
    return model(graph(nodes, [value_info("x", FLOAT, [2, 8])], [value_info("t%d" % (n - 1), FLOAT, [2, 8])]))


def conv(group, wch):
    w = tensor("W", [8, wch, 3, 3], FLOAT, bytes(4 * 8 * wch * 9))
    n = node("Conv", ["x", "W"], ["y"], "conv0", attr_int("group", group))
    return model(graph([n], [value_info("x", FLOAT, [1, 4, 8, 8])], inits=[w]))


def raw_short():
    w = tensor("W", [8, 4], FLOAT, bytes(4 * 8 * 4 - 4))
    n = node("MatMul", ["x", "W"], ["y"], "fc")
    return model(graph([n], [value_info("x", FLOAT, [2, 8])], inits=[w]))


def external(name, dims):
    return b"".join(f_int(1, d) for d in dims) + f_int(2, FLOAT) + f_bytes(8, name) + f_int(14, 1)


def dims_model(xd, wd):
    n = node("MatMul", ["x", "W"], ["y"], "fc")
    return model(graph([n], [value_info("x", FLOAT, xd)], inits=[external("W", wd)]))


def main(argv):
    kind, args = argv[1], argv[2:]
    if kind == "nested-if":
        data = nested_if(int(args[0]))
    elif kind == "nested-type":
        data = nested_type(int(args[0]))
    elif kind == "chain":
        data = chain(int(args[0]))
    elif kind == "conv":
        data = conv(int(args[0]), int(args[1]))
    elif kind == "dims":
        data = dims_model([int(args[0]), int(args[1])], [int(args[1]), 4])
    elif kind == "init-dims":
        data = dims_model([2, 8], [int(args[0]), int(args[1])])
    elif kind == "raw-short":
        data = raw_short()
    else:
        sys.exit("gen_onnx.py: unknown kind %r (see the usage at the top of the file)" % kind)
    with open(args[-1], "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main(sys.argv)
