/* Hugging Face config.json reading (model layer): a parsed config object in, a tf_config out. */
#ifndef AP_MODEL_HFCONFIG_H
#define AP_MODEL_HFCONFIG_H

#include <jansson.h>

#include "model/transformer.h"

/* Fills c from the parsed config root. Strings in c point into root, which must outlive c's use. Errors name
 * file and field: AP_INVALID for a bad or missing field, AP_UNSUPPORTED for an unknown model_type (with the
 * closest supported names). */
AP_HIDDEN ap_status hf_config_read(ap_ctx *ctx, const char *file, json_t *root, tf_config *c);
/* The supported model_type names; returns how many were written. */
AP_HIDDEN size_t hf_model_types(const char **out, size_t cap);

#endif
