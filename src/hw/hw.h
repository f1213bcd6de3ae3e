/* The hardware module: devices, link hierarchies and clusters (hw layer, above core, below cost).
 *
 * A cluster is one or more node groups; each group is n_nodes nodes of one node type, and a node type is a
 * device type, a device count per node and a link hierarchy. Devices carry a global rank, numbered node by
 * node and group by group in file order. The hierarchy runs from the innermost level (NVLink, xGMI) to the
 * outermost (the inter-node network); each level groups devices into domains of contiguous ranks, and the
 * outermost level's single domain is the whole cluster. The cost model asks which level a communication
 * group crosses (hw_cluster_level_for_group) and reads the bandwidth and latency it gets there.
 *
 * Reading order: the types below, then hw_json.h and hw_json.c (strict JSON field helpers), device.c
 * (device files and the dtype table), presets.c (the embedded data files), cluster_json.c (the cluster file
 * format), cluster.c (specs, shorthands and group queries), cluster_describe.c (JSON and text output). The
 * file formats are documented in docs/formats.md.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_HW_H
#define AP_HW_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

enum {
  HW_NAME_MAX = 64,    /* bytes for a name, with its NUL: names are at most 63 characters */
  HW_TEXT_MAX = 160,   /* bytes for a device description, with its NUL */
  HW_MAX_LEVELS = 4,   /* link levels per hierarchy (NVLink, PCIe, network ... ) */
  HW_MAX_GROUPS = 64,  /* node groups per cluster */
};

/* The most devices a cluster may hold. TUNING: several times today's largest training clusters, and small
 * enough that a walk over every rank (hw_cluster_level_for_group) stays in milliseconds. */
#define HW_MAX_DEVICES ((int64_t)1 << 22)

/* Number formats whose peak throughput a device states. The names are the keys of peak_flop_per_s in a
 * device file; the table in device.c is tied to this enum. */
typedef enum {
  HW_DTYPE_FP32,
  HW_DTYPE_TF32,
  HW_DTYPE_BF16,
  HW_DTYPE_FP16,
  HW_DTYPE_FP8,
  HW_DTYPE_FP4,
  HW_DTYPE_COUNT
} hw_dtype;

/* How the devices of one domain are wired. A switch gives every device its full bandwidth to any peer
 * (NVSwitch); a mesh splits it over point-to-point links, one to each peer (AMD Infinity Fabric on an 8-GPU
 * MI300X board), so a group of m devices uses only m-1 of a device's links. */
typedef enum { HW_TOPO_SWITCH, HW_TOPO_MESH, HW_TOPO_COUNT } hw_topology;

/* One device type. A value type: the strings are inline, so a device can be copied and kept freely. */
typedef struct {
  char name[HW_NAME_MAX];         /* "h100-sxm" */
  char vendor[HW_NAME_MAX];       /* "nvidia", "amd"; "" when not stated */
  char description[HW_TEXT_MAX];  /* "NVIDIA H100 SXM5 80 GB"; "" when not stated */
  char default_node[HW_NAME_MAX]; /* cluster preset that "NAME:COUNT" builds on; "" when none */
  char chip[HW_NAME_MAX];         /* the GPU silicon ("GH100"); devices of one chip share fitted compute
                                   * fitted compute constants (cost/calib.c); "" when not stated */
  char family[HW_NAME_MAX];       /* the architecture ("Hopper"): a chip with no fitted constants takes those of
                                   * the nearest fitted chip of its family; "" when not stated */
  double peak_flop_per_s[HW_DTYPE_COUNT]; /* dense (not sparse) peak; 0 = unsupported */
  int64_t mem_bytes;                      /* device memory capacity */
  double mem_bw_Bps;                      /* peak device memory bandwidth */
  double tdp_w;                           /* board power; 0 = not stated */
  char profile_key[HW_NAME_MAX]; /* an inline "profile" (autopar-profile/1): its key in the context's memo,
                                  * "hw.profile:" + this, where the profile's JSON text lies; "" when none */
  /* The link between the device and its host's memory, per direction: PCIe (Gen4 x16 on A100, Gen5 x16 on
   * H100/B200) or chip-to-chip (NVLink-C2C on GH200/GB200). 0 = not stated: no offload to the host. */
  char host_link[HW_NAME_MAX]; /* "pcie", "c2c"; "" when not stated */
  double host_link_bw_Bps;
} hw_device;

/* A node's host side, for offloading model states (ZeRO-Offload, ZeRO-Infinity). 0 = not stated. */
typedef struct {
  double mem_bytes;   /* host (CPU) memory of one node */
  double mem_bw_Bps;  /* its peak bandwidth, all sockets */
  double nvme_bw_Bps; /* the node's local NVMe drives together, the slower of read and write */
} hw_host;

/* One level of a link hierarchy. Bandwidths are per device and per direction (unidirectional). */
typedef struct {
  char name[HW_NAME_MAX];  /* "nvlink", "xgmi", "network" */
  hw_topology topology;
  int64_t domain_devices;  /* devices per domain; 0 on the outermost level, whose domain is the cluster */
  double bw_Bps;           /* usable per device when every device of the node communicates at once */
  double latency_s;        /* per message step (the alpha of an alpha-beta cost) */
  double oversubscription; /* >= 1: bandwidth at this level is divided by it */
  int64_t nics_per_node;   /* outermost level: NICs of one node; 0 when not stated */
  double nic_bw_Bps;       /* outermost level: one NIC's bandwidth; 0 when not stated */
  double devices_per_nic;  /* outermost level: devices that share one NIC (1 = a NIC per device) */
} hw_link_level;

/* n_nodes nodes of one node type. Ranks first_rank .. first_rank + n_devices - 1 belong to it. */
typedef struct {
  hw_device device;
  char node_name[HW_NAME_MAX]; /* the cluster preset this node type came from; "" when given inline */
  int64_t n_nodes;
  int64_t devices_per_node;
  int64_t first_rank;
  int64_t n_devices; /* n_nodes * devices_per_node */
  int n_levels;      /* the same in every group of a cluster */
  hw_link_level levels[HW_MAX_LEVELS];
  hw_host host;      /* the node's host memory and NVMe ("host" in a cluster file) */
} hw_node_group;

/* A loaded cluster. Every pointer in it points into the arena of the ap_cluster that holds it. */
typedef struct {
  const char *name;
  const char *description; /* "" when none */
  const char *origin;      /* where it came from: "data/clusters/dgx-h100.json", a path, or a shorthand */
  int n_groups;
  hw_node_group *groups;
  int n_levels;
  int64_t n_nodes;
  int64_t n_devices;
} hw_cluster;

/* The public handle: the cluster and the arena that owns all of its memory. */
struct ap_cluster {
  arena *arena;
  hw_cluster c;
};

/* What a communication group gets from the hierarchy; see hw_cluster_level_for_group. */
typedef struct {
  int level;                        /* innermost level whose domain holds each whole group */
  const char *level_name;           /* that level's name; owned by the cluster */
  int64_t n_groups;                 /* groups of this shape that run side by side */
  int64_t members_per_inner_domain; /* most members of one group inside one domain of level-1; size at 0 */
  int64_t members_per_node;         /* most members of one group inside one node */
  double bw_Bps;           /* effective per-device bandwidth per direction at that level (slowest group) */
  double latency_s;        /* latency at that level (largest over the node groups touched) */
  double devices_per_nic;  /* at the outermost level: devices sharing one NIC (largest); 0 below it */
} hw_group_link;

/* ---- dtypes and topologies (device.c) ---- */
/* The dtype's name ("bf16"); "?" for an out-of-range value. Static storage. */
AP_HIDDEN const char *hw_dtype_name(hw_dtype dtype);
/* Finds a dtype by name, case-insensitively; false when the name is not one. */
AP_HIDDEN bool hw_dtype_from_name(const char *name, hw_dtype *out);
/* The topology's name ("switch", "mesh"). Static storage. */
AP_HIDDEN const char *hw_topology_name(hw_topology topology);
AP_HIDDEN bool hw_topology_from_name(const char *name, hw_topology *out);

/* ---- devices (device.c) ---- */
/* Looks a device up among the presets by name or alias, case-insensitively, and copies it to *out. On an
 * unknown name returns AP_NOTFOUND with the closest names in the context's error. */
AP_HIDDEN ap_status hw_device_find(ap_ctx *ctx, const char *name, hw_device *out);
/* The family, vendor and dense bf16 peak of chip `chip`, read from the first device preset on it (presets.c);
 * false (family and vendor "", peak 0) when no preset is on that chip. vendor may be NULL. */
AP_HIDDEN bool hw_chip_info(const char *chip, char *family, size_t family_n, char *vendor, size_t vendor_n,
                            double *bf16_peak_flop_per_s);
/* Parses a device file held in memory; file names the text in error messages. */
AP_HIDDEN ap_status hw_device_parse(ap_ctx *ctx, const char *file, const char *text, size_t n_bytes,
                                    hw_device *out);

/* ---- clusters (cluster_json.c: reading and the handle; cluster.c: specs and rank geometry) ---- */
/* Parses a cluster file held in memory (docs/formats.md); file names the text in error messages. On
 * success the caller frees *out with ap_cluster_free. */
AP_HIDDEN ap_status hw_cluster_parse(ap_ctx *ctx, const char *file, const char *text, size_t n_bytes,
                                     ap_cluster **out);
/* The count part of a shorthand (after the ':' of spec): "N" devices (a whole number of nodes of dpn, or fewer
 * than one node) or "NxG" nodes of G <= dpn devices, into *n_nodes and *devices_per_node; every value is
 * range-checked before any arithmetic (at most HW_MAX_DEVICES). preset names the node in messages. */
AP_HIDDEN ap_status hw_shorthand_count(ap_ctx *ctx, const char *spec, const char *count, const char *preset,
                                       int64_t dpn, int64_t *n_nodes, int64_t *devices_per_node);
/* The cluster inside a handle; owned by the handle. */
AP_HIDDEN const hw_cluster *hw_cluster_of(const ap_cluster *cluster);
/* A cluster of the first n devices of a one-group cluster: n of one node's devices (its links rescaled as for a
 * partial node) or n / devices_per_node whole nodes; AP_INVALID otherwise. The caller frees *out. */
AP_HIDDEN ap_status hw_cluster_first_devices(ap_ctx *ctx, const ap_cluster *cluster, int64_t n, ap_cluster **out);
/* The node group that holds a global rank, or NULL when rank is out of range. Owned by the cluster. */
AP_HIDDEN const hw_node_group *hw_cluster_group_of_rank(const hw_cluster *c, int64_t rank);
/* The innermost link level's domain over every node group: the most devices a tensor-parallel group may span
 * on fast links anywhere in the cluster. */
AP_HIDDEN int64_t hw_cluster_fast_domain(const hw_cluster *c);
/* The link level crossed by the communication groups of one mesh axis: groups of `size` ranks whose
 * consecutive members are `stride` ranks apart, i.e. for each block of stride*size consecutive ranks and
 * each offset i < stride, the ranks {block + i + k*stride : k < size}. Every such group in the cluster is
 * examined (ranks past the last whole block are left out) and the worst case is reported. A group of one
 * rank reports level 0. Fails with AP_INVALID when stride or size is below 1 or stride*size exceeds the
 * cluster. Runs in O(n_devices) at worst (a few ms for 100,000 devices); callers that ask often should
 * cache the answer per axis. */
AP_HIDDEN ap_status hw_cluster_level_for_group(ap_ctx *ctx, const hw_cluster *c, int64_t stride, int64_t size,
                                               hw_group_link *out);

/* The first rank of the domain that holds `rank` at link level `level` (its node for a negative level): domains
 * are runs of contiguous ranks inside one node group, so two ranks share a domain exactly when this agrees. */
AP_HIDDEN int64_t hw_cluster_domain_first(const hw_cluster *c, int level, int64_t rank);
/* What a group with `members` devices inside one domain of link level `level` gets there: the level's name,
 * bandwidth per device and direction (the slowest of the node groups marked in touched, HW_MAX_GROUPS entries,
 * or of all when touched is NULL; a mesh gives members-1 of a device's links), latency (the largest) and, at the
 * outermost level, devices per NIC. Writes level, level_name, bw_Bps, latency_s and devices_per_nic of out. */
AP_HIDDEN void hw_cluster_level_link(const hw_cluster *c, int level, const bool *touched, int64_t members,
                                     hw_group_link *out);

#endif
