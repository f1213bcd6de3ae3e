/* The ONNX reader's nesting bound (model layer, core library; issue 19, class 2): a scan of the protobuf wire
 * format of an ONNX file before protobuf-c decodes it. protobuf-c's unpack recurses once per nested message
 * with no depth limit, and ONNX's schema has cycles (GraphProto → NodeProto → AttributeProto → GraphProto for
 * If/Loop/Scan subgraphs; TypeProto → TypeProto.Sequence/Map/Optional → TypeProto), so a file of a few
 * thousand nested subgraphs (134 KB) overflowed the C stack inside protobuf-c. The scan knows which fields of
 * which messages are messages (onnx/onnx.proto as Debian's libonnx-dev ships it), follows them with an
 * explicit depth counter and refuses a file nested deeper than ONNX_MAX_NESTING messages; every other
 * length-delimited field (strings, bytes, packed numbers, and messages that cannot nest: TensorProto,
 * TensorShapeProto, OperatorSetIdProto …) is skipped unread. One pass over the bytes, each byte visited once;
 * the scan's own recursion is bounded by the same limit. Bytes that are not well-formed protobuf are left to
 * protobuf-c, which refuses them. Called by the "onnx" part (src/model/onnx_pb.c) before it unpacks. */
#include <stdio.h>

#include "model/onnx.h"

/* The messages that can hold a message that can nest (the others are skipped whole). */
typedef enum { M_LEAF, M_MODEL, M_TRAINING, M_FUNCTION, M_GRAPH, M_NODE, M_ATTR, M_VALUE, M_TYPE, M_TYPE_ONE, M_TYPE_MAP } msg;

static const char *const msg_name[] = {"", "ModelProto", "TrainingInfoProto", "FunctionProto", "GraphProto",
                                       "NodeProto", "AttributeProto", "ValueInfoProto", "TypeProto",
                                       "TypeProto.Sequence", "TypeProto.Map"};
_Static_assert(sizeof msg_name / sizeof msg_name[0] == M_TYPE_MAP + 1, "msg_name matches msg");

/* One message field of a message: field number and the message it holds. */
typedef struct {
  msg in;
  uint32_t field;
  msg holds;
} sub_field;

/* onnx.proto's fields whose message can (through others) hold a GraphProto or a TypeProto. */
static const sub_field fields[] = {
    {M_MODEL, 7, M_GRAPH},      {M_MODEL, 20, M_TRAINING}, {M_MODEL, 25, M_FUNCTION}, /* graph, training_info, functions */
    {M_TRAINING, 1, M_GRAPH},   {M_TRAINING, 2, M_GRAPH},                              /* initialization, algorithm */
    {M_FUNCTION, 7, M_NODE},                                                          /* node */
    {M_GRAPH, 1, M_NODE},       {M_GRAPH, 11, M_VALUE},    {M_GRAPH, 12, M_VALUE},    /* node, input, output */
    {M_GRAPH, 13, M_VALUE},                                                           /* value_info */
    {M_NODE, 5, M_ATTR},                                                              /* attribute */
    {M_ATTR, 6, M_GRAPH},       {M_ATTR, 11, M_GRAPH},                                /* g, graphs */
    {M_ATTR, 14, M_TYPE},       {M_ATTR, 15, M_TYPE},                                 /* tp, type_protos */
    {M_VALUE, 2, M_TYPE},                                                             /* type */
    {M_TYPE, 4, M_TYPE_ONE},    {M_TYPE, 9, M_TYPE_ONE},   {M_TYPE, 5, M_TYPE_MAP},   /* sequence, optional, map */
    {M_TYPE_ONE, 1, M_TYPE},    {M_TYPE_MAP, 2, M_TYPE},                              /* elem_type, value_type */
};

static msg field_holds(msg in, uint32_t field) {
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (fields[i].in == in && fields[i].field == field) return fields[i].holds;
  return M_LEAF;
}

typedef struct {
  const uint8_t *base;
  size_t deep_at; /* byte offset of the message found too deep */
  msg deep_msg;
} scan;

/* Reads a varint at *p (before end); false when it runs past end or beyond 10 bytes. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (int i = 0; i < 10 && *p < end; i++) {
    uint8_t b = *(*p)++;
    x |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return false;
}

/* Scans the message m of bytes [p, end) at nesting depth depth; returns false when too deep (s says where).
 * Malformed bytes end the scan of that message quietly: protobuf-c refuses them. */
static bool scan_msg(scan *s, msg m, const uint8_t *p, const uint8_t *end, int depth) {
  if (depth > ONNX_MAX_NESTING) {
    s->deep_at = (size_t)(p - s->base);
    s->deep_msg = m;
    return false;
  }
  while (p < end) {
    uint64_t key, v;
    if (!varint(&p, end, &key)) return true;
    switch (key & 7) {
    case 0:
      if (!varint(&p, end, &v)) return true;
      break;
    case 1:
      if ((size_t)(end - p) < 8) return true;
      p += 8;
      break;
    case 5:
      if ((size_t)(end - p) < 4) return true;
      p += 4;
      break;
    case 2: {
      if (!varint(&p, end, &v) || v > (uint64_t)(end - p)) return true;
      msg sub = key >> 3 <= UINT32_MAX ? field_holds(m, (uint32_t)(key >> 3)) : M_LEAF;
      if (sub != M_LEAF && !scan_msg(s, sub, p, p + v, depth + 1)) return false;
      p += v;
      break;
    }
    default: /* groups (3, 4) are not in onnx.proto, and 6, 7 are not wire types */
      return true;
    }
  }
  return true;
}

ap_status onnx_wire_check(ap_ctx *ctx, const char *file, const void *bytes, size_t n) {
  scan s = {.base = bytes};
  if (!n || scan_msg(&s, M_MODEL, s.base, s.base + n, 0)) return AP_OK;
  return ctx_fail(ctx, AP_INVALID,
                  "%s: a %s nested more than %d messages deep (byte %zu): subgraphs within subgraphs or types within "
                  "types nest too deep (autopar reads at most %d levels)",
                  file, msg_name[s.deep_msg], ONNX_MAX_NESTING, s.deep_at, ONNX_MAX_NESTING);
}
