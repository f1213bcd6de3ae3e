# Optional part "ilp" (docs/build.md): the intra-op ILP through CBC's C API (coinor-libcbc-dev, EPL-1.0;
# NOTES.md "Packages"). Only src/search/solve/sharding_ilp.c includes Cbc_C_Interface.h; everything else of
# `autopar solve` is core. The include dir is passed as -isystem so that CBC's own headers do not meet -Werror.
# pkg-config runs when make reads this file, after scripts/deps.sh has installed CBC (Makefile, "The first
# build"); the fallback, Debian's layout of the same package, is for a cbc.pc that is missing all the same.
CBC_CFLAGS := $(shell $(PKG_CONFIG) --cflags cbc 2>/dev/null || echo -I/usr/include/coin)
CBC_LIBS   := $(shell $(PKG_CONFIG) --libs cbc 2>/dev/null || echo -lCbcSolver -lCbc -lCgl -lOsiClp -lClp -lOsi -lCoinUtils -lm)
PART_SRC_ilp    := src/search/solve/sharding_ilp.c
PART_CFLAGS_ilp := $(patsubst -I%,-isystem %,$(CBC_CFLAGS))
PART_LIBS_ilp   := $(CBC_LIBS)
PART_TESTS_ilp  := tests/test_solve_ilp.c

# parts.o carries -DAP_PART_ILP: rebuild it when this part changes.
$(BUILD)/obj/src/cli/parts.o: mk/ilp.mk
