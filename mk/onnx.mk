# The ONNX import part (docs/build.md, docs/model-inputs.md "ONNX"): decodes .onnx files with protobuf-c.
# The C code for onnx.proto (as Debian's libonnx-dev ships it) is generated at build time by protoc-c into
# $(BUILD)/gen/onnx/ and never committed. Only the files that include protobuf-c headers are in the part; the
# importer they call (src/model/onnx_import.c and friends) is plain C in the core library.
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
ONNX_GEN   := $(BUILD)/gen/onnx

PART_SRC_onnx    := src/model/onnx_pb.c $(ONNX_GEN)/onnx.pb-c.c
PART_CFLAGS_onnx := -I$(ONNX_GEN) $(shell $(PKG_CONFIG) --cflags libprotobuf-c 2>/dev/null)
PART_LIBS_onnx   := $(shell $(PKG_CONFIG) --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
PART_TESTS_onnx  := tests/test_onnx.c tests/test_graph_plan_io.c tests/test_search_onnx.c tests/test_shard_diff.c tests/test_onnx_tags.c tests/test_megatron_onnx.c

$(ONNX_GEN)/onnx.pb-c.c $(ONNX_GEN)/onnx.pb-c.h &: $(ONNX_PROTO) | $(BUILD)/.deps
	@mkdir -p $(ONNX_GEN)
	@$(call say,PROTOC,$(ONNX_PROTO))
	$(Q)protoc-c --proto_path=$(dir $(ONNX_PROTO)) --c_out=$(ONNX_GEN) $(ONNX_PROTO)

$(BUILD)/obj/src/model/onnx_pb.o: $(ONNX_GEN)/onnx.pb-c.h

# Installed by scripts/deps.sh before make reads this file; a rule all the same, so that a proto still missing
# says where it comes from instead of make's "No rule to make target".
$(ONNX_PROTO):
	@echo "autopar: $@ is missing: scripts/deps.sh installs it (Debian's libonnx-dev), or set ONNX_PROTO" >&2; exit 1
$(BUILD)/obj/src/cli/parts.o: mk/onnx.mk
