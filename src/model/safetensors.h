/* safetensors files (model layer): the weight format of Hugging Face checkpoints, read into fp32 and written
 * from fp32. The format (github.com/huggingface/safetensors, README "Format"): an 8-byte little-endian
 * header length N, N bytes of JSON mapping each tensor name to {"dtype", "shape", "data_offsets": [begin,
 * end]} (offsets relative to the byte after the header) plus an optional "__metadata__" object of strings,
 * then the raw little-endian tensor bytes. The reader accepts F32, BF16 and F16 and converts to fp32; it checks
 * every offset against the file, the byte count against dtype and shape, and refuses overlapping tensors.
 * It never prints: failures go through ctx_fail naming the file and the tensor.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_MODEL_SAFETENSORS_H
#define AP_MODEL_SAFETENSORS_H

#include <stdint.h>

#include "core/core.h"

enum { ST_MAX_DIMS = 8 };

typedef struct {
  char *name;
  int n_dims;
  int64_t shape[ST_MAX_DIMS];
  int64_t n_elems;
  float *data; /* n_elems values, converted to fp32 */
} st_tensor;

typedef struct {
  st_tensor *t;
  int64_t n;
} st_file;

/* Parses a whole file held in memory; file names it in messages. On success the caller frees *out with
 * st_free. */
AP_HIDDEN ap_status st_parse(ap_ctx *ctx, const char *file, const uint8_t *bytes, size_t n_bytes, st_file *out);
/* Reads and parses path. */
AP_HIDDEN ap_status st_read(ap_ctx *ctx, const char *path, st_file *out);
AP_HIDDEN void st_free(st_file *f);
/* The tensor called name, or NULL. */
AP_HIDDEN const st_tensor *st_find(const st_file *f, const char *name);

/* Writes n tensors as F32 to path through util_write_open (an exclusive temporary beside path, renamed at the
 * end), so a failure leaves no partial file and a planted name is never followed.
 * names[i] is a tensor of n_dims[i] dimensions shape[i][..] whose values are data[i]. */
typedef struct {
  const char *name;
  int n_dims;
  int64_t shape[ST_MAX_DIMS];
  const float *data;
} st_out;
AP_HIDDEN ap_status st_write(ap_ctx *ctx, const char *path, const st_out *tensors, int64_t n);

#endif
