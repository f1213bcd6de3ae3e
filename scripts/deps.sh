#!/bin/sh
# Installs the Debian packages that autopar's build and tests need, and only those that are missing.
# Called by every Makefile target through build/.deps, so a fresh Debian 12 machine needs no manual step.
set -e
need=""
# python3 runs the Python module's tests; chromium opens the HTML report in the browser test.
# libonnx-dev ships onnx.proto; protobuf-c-compiler (protoc-c) and libprotobuf-c-dev build the ONNX part (mk/onnx.mk);
# libonnx-testdata holds the .onnx files the ONNX fuzz seeds were taken from. coinor-libcbc-dev is the "ilp" part's
# solver (mk/ilp.mk). OpenMPI and OpenBLAS are the executor part's (mk/exec.mk, docs/executor.md). locales has the
# sources of the de_DE.UTF-8 locale generated below.
for p in libjansson-dev libcmocka-dev pkg-config clang libclang-rt-14-dev python3 chromium libonnx-dev protobuf-c-compiler \
  libprotobuf-c-dev libonnx-testdata coinor-libcbc-dev libopenmpi-dev openmpi-bin libopenblas-dev locales; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  echo "deps: installing$need" >&2
  if [ "$(id -u)" != 0 ]; then
    echo "deps: missing Debian packages:$need (run as root or install them)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq $need >/dev/null
fi
# A locale with a decimal comma, for the locale tests (tests/test_locale.c, tests/sh_locale.sh): the library's
# numbers must read and write the same under it. Without root the tests say that they skip.
if ! locale -a 2>/dev/null | grep -qix 'de_DE\.utf-\?8'; then
  if [ "$(id -u)" = 0 ]; then
    echo "deps: generating the locale de_DE.UTF-8" >&2
    localedef -i de_DE -f UTF-8 de_DE.UTF-8
  else
    echo "deps: the locale de_DE.UTF-8 is missing (run as root to generate it); the locale tests will skip" >&2
  fi
fi
