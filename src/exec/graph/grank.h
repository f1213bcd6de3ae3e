/* The rank program's graph mode (exec layer, bin/autopar-rank; grank.c): an ONNX model trained under an
 * autopar-plan/2 plan. Internal header: not installed, not part of the public API. */
#ifndef AP_EXEC_GRANK_H
#define AP_EXEC_GRANK_H

#include <stdbool.h>

/* Whether the model argument names an ONNX file (ends in .onnx): then rank.c's main runs gr_main. */
bool gr_is_graph(const char *model);
/* The rank program's main for an ONNX model (the arguments as `autopar run` passes them). */
int gr_main(int argc, char **argv);

#endif
