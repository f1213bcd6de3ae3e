# Optional part "exec": the reference training executor (docs/executor.md). Its numerics (src/exec/ex_*.c, fp32 on
# OpenBLAS) form libautopar-exec.a; the rank program bin/autopar-rank (src/exec/rank*.c, PART_PROG_SRC_exec: in no
# library) is the only binary that links MPI. `autopar run` (core CLI) launches it through mpirun, so
# neither bin/autopar nor libautopar links MPI. --as-needed keeps OpenBLAS off binaries that call none of it.
EXEC_MPI_CFLAGS := $(shell $(PKG_CONFIG) --cflags ompi 2>/dev/null)
EXEC_MPI_LIBS   := $(shell $(PKG_CONFIG) --libs ompi 2>/dev/null)
PART_SRC_exec    := $(sort $(wildcard src/exec/ex_*.c src/exec/graph/gx_*.c))
PART_PROG_SRC_exec := $(sort $(wildcard src/exec/rank*.c src/exec/graph/grank*.c))
PART_CFLAGS_exec := $(shell $(PKG_CONFIG) --cflags openblas 2>/dev/null) $(EXEC_MPI_CFLAGS)
PART_LIBS_exec   := -Wl,--as-needed $(shell $(PKG_CONFIG) --libs openblas 2>/dev/null)
PART_TESTS_exec  := tests/test_exec.c tests/test_exec_run.c
EXEC_RANK_SRC    := $(PART_PROG_SRC_exec)
ifneq ($(CORE_ONLY),1)
EXEC_RANK_BIN    := $(dir $(BIN))autopar-rank
ifeq ($(BIN),)
EXEC_RANK_BIN    := bin/autopar-rank
endif
PART_BINS        += $(EXEC_RANK_BIN)
EXEC_RANK_OBJ    := $(EXEC_RANK_SRC:%.c=$(BUILD)/obj/%.o)
$(EXEC_RANK_OBJ): CPPFLAGS += $(PART_CFLAGS_exec)
# The graph runtime (src/exec/graph/) decodes ONNX files through the "onnx" part, so the rank program links it
# where it is built (AP_PART_ONNX), and runs transformers only without it.
EXEC_RANK_ONNX_A := $(if $(filter onnx,$(if $(PARTS),$(PARTS),$(PARTS_ALL))),$(BUILD)/lib/libautopar-onnx.a)
$(EXEC_RANK_OBJ): CPPFLAGS += $(if $(EXEC_RANK_ONNX_A),-DAP_PART_ONNX)
$(EXEC_RANK_BIN): $(EXEC_RANK_OBJ) $(BUILD)/lib/libautopar-exec.a $(EXEC_RANK_ONNX_A) $(BUILD)/lib/libautopar.a
	@mkdir -p $(@D)
	@$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $(EXEC_RANK_OBJ) $(BUILD)/lib/libautopar-exec.a $(EXEC_RANK_ONNX_A) $(BUILD)/lib/libautopar.a \
	  $(LDFLAGS) $(EXEC_MPI_LIBS) $(PART_LIBS_exec) $(if $(EXEC_RANK_ONNX_A),$(PART_LIBS_onnx)) $(LDLIBS)
test: $(EXEC_RANK_BIN)
endif
# `make install` puts the rank program where `autopar run` looks for it: PREFIX/libexec/autopar/.
ifneq ($(CORE_ONLY),1)
.PHONY: install-exec
install: install-exec
install-exec: $(EXEC_RANK_BIN)
	install -d $(DESTDIR)$(PREFIX)/libexec/autopar
	install -m 755 $(EXEC_RANK_BIN) $(DESTDIR)$(PREFIX)/libexec/autopar/
endif
# `make bench-executor`: the cost model against the executor on this machine (bench/executor.py; not in make test).
ifneq ($(CORE_ONLY),1)
.PHONY: bench-executor bench-exec-effects bench-graph-executor
bench-executor: $(BIN) $(EXEC_RANK_BIN)
	python3 bench/executor.py --bin $(BIN)
# `make bench-graph-executor`: op-level plans of ONNX graphs, predicted against measured (bench/graph_executor.py).
bench-graph-executor: $(BIN) $(EXEC_RANK_BIN)
	python3 bench/graph_executor.py --bin $(BIN)
# `make bench-exec-effects`: what separates measured from predicted step time (bench/exec_effects.py; a few minutes).
bench-exec-effects: $(BIN) $(EXEC_RANK_BIN)
	python3 bench/exec_effects.py --bin $(BIN)
endif
