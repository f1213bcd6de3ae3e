/* The autopar op-graph JSON format (model layer): models that are not transformers, described op by op
 * (docs/graph-format.md). Produces the same graph type as the transformer builder. */
#ifndef AP_MODEL_GRAPH_JSON_H
#define AP_MODEL_GRAPH_JSON_H

#include <jansson.h>

#include "model/graph.h"

/* True when root looks like an op-graph file (it has "format": "autopar-graph/1" or a "blocks" array). */
AP_HIDDEN bool graph_json_detect(json_t *root);
/* Reads root into *out, allocating everything from a. Errors name the file and the field path
 * ("net.json: blocks[0].ops[2].in[1]: unknown tensor \"y\""). */
AP_HIDDEN ap_status graph_json_read(ap_ctx *ctx, arena *a, const char *file, json_t *root, graph *out);

#endif
