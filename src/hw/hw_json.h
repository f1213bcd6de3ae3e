/* Functions shared by the files of the hw module that read JSON: strict field checks, the embedded presets,
 * and the readers of device and cluster objects. Private to src/hw/; other modules use hw.h only. */
#ifndef AP_HW_JSON_H
#define AP_HW_JSON_H

#include "core/jsonx.h"
#include "hw/hw.h"

/* ---- Reading helpers (hw_json.c) ---- */
/* Fails with "unknown field (did you mean …?)" on the first key of obj that is not in allowed. */
AP_HIDDEN ap_status hwj_check_keys(const jx_src *s, json_t *obj, const char *const *allowed, size_t n_allowed);
/* A number > 0 (absent optional fields leave *out untouched). */
AP_HIDDEN ap_status hwj_positive(const jx_src *s, json_t *obj, const char *key, bool required, double *out,
                                 bool *found);
/* A number >= 0. */
AP_HIDDEN ap_status hwj_nonnegative(const jx_src *s, json_t *obj, const char *key, bool required, double *out,
                                    bool *found);
/* A non-empty string of at most cap-1 bytes, copied into out. */
AP_HIDDEN ap_status hwj_text(const jx_src *s, json_t *obj, const char *key, bool required, char *out, size_t cap);
/* Checks the optional "aliases" (an array of names) and "sources" (an object of strings) of obj. */
AP_HIDDEN ap_status hwj_check_meta(const jx_src *s, json_t *obj);
/* Describes a nested location: child->where becomes "parent.key" or "parent.key[index]" (index >= 0). The
 * text lives in buf, which must outlive child. */
AP_HIDDEN void hwj_child(const jx_src *parent, const char *key, long index, char *buf, size_t cap, jx_src *child);

/* ---- Embedded presets (presets.c) ---- */
typedef enum { HW_PRESET_DEVICE, HW_PRESET_CLUSTER, HW_PRESET_KIND_COUNT } hw_preset_kind;
/* True when f is a preset file of this kind (a .json file under data/devices/ or data/clusters/). */
AP_HIDDEN bool hw_preset_is(const embedded_file *f, hw_preset_kind kind);
/* The preset whose name or one of whose aliases equals name (case-insensitively), or NULL. */
AP_HIDDEN const embedded_file *hw_preset_find(hw_preset_kind kind, const char *name);
/* The canonical name of preset f, copied into out ("" when the file has none). */
AP_HIDDEN void hw_preset_name(const embedded_file *f, char *out, size_t cap);
/* Writes ", did you mean a, b?"-ready text: the closest preset names and aliases of the kinds asked for,
 * as "a, b, c" ("" when none is close). */
AP_HIDDEN void hw_preset_suggest(const char *name, bool devices, bool clusters, char *out, size_t cap);

/* ---- Readers (device.c, cluster_json.c) ---- */
/* Reads a device object (the device file format) into *out. */
AP_HIDDEN ap_status hw_device_from_json(const jx_src *s, json_t *obj, hw_device *out);
/* Builds a cluster from a parsed cluster file. origin says where it came from (kept in the cluster); NULL
 * means file. On success the caller frees *out with ap_cluster_free. */
AP_HIDDEN ap_status hw_cluster_from_json(ap_ctx *ctx, const char *file, json_t *root, const char *origin,
                                         ap_cluster **out);

#endif
