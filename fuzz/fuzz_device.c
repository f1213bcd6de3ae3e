/* libFuzzer target for the device file reader (hw_device_parse, src/hw/device.c; docs/formats.md): bytes are
 * a device file. An accepted device must state a positive memory and peak throughput it can be asked about;
 * a failure says why on one line. Seeds: fuzz/seeds/device/ (the shipped device presets). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hw/hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) return 0;
  hw_device d;
  if (hw_device_parse(ctx, "device.json", (const char *)data, size, &d) == AP_OK) {
    if (!d.name[0] || !(d.mem_bytes > 0)) __builtin_trap();
  } else if (!*ap_ctx_error(ctx) || strchr(ap_ctx_error(ctx), '\n')) {
    __builtin_trap();
  }
  ap_ctx_free(ctx);
  return 0;
}
