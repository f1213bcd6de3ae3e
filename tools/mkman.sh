#!/bin/sh
# Writes the manual page autopar(1) to stdout from the binary's own help texts (`autopar --help` and
# `autopar COMMAND --help`), so that the page can never disagree with the options the binary takes.
# Usage: tools/mkman.sh BIN > autopar.1   (the Makefile runs it for `make man` and `make install`).
set -eu
bin=${1:-bin/autopar}
esc() { sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\\&'/" -e 's/-/\\-/g'; }
version=$("$bin" --version | sed 's/^autopar //')
cat <<HDR
.TH AUTOPAR 1 "" "autopar $version" "User Commands"
.SH NAME
autopar \\- find the fastest way to train a model on a cluster of accelerators
.SH SYNOPSIS
.B autopar
.I COMMAND
[\\fIOPTIONS\\fR]
.SH DESCRIPTION
autopar builds the space of hybrid parallel training plans for a model (a Hugging Face config.json, a
built\\-in preset, an op\\-graph JSON or an ONNX file) on a cluster, predicts each plan's iteration time and
peak memory per device, searches the space and exports the winner for Megatron\\-LM, DeepSpeed or
torchtitan.
.SH COMMANDS
HDR
# The command table of `autopar --help`: lines "  NAME  summary" after "commands:".
cmds=$("$bin" --help | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z-]*\) .*/\1/p')
for c in $cmds; do
  printf '.SS autopar %s\n' "$c"
  "$bin" "$c" --help 2>&1 | awk '
    NR == 1 { print ".nf"; usage = 1 }
    usage && /^$/ { print ".fi\n.PP"; usage = 0; next }
    /^options:/ { opts = 1; print ".PP\nOptions:"; next }
    opts && /^  -/ {
      line = substr($0, 3); n = index(line, "  ");
      if (n == 0) { flag = line; text = "" } else { flag = substr(line, 1, n - 1); text = substr(line, n) }
      sub(/^ +/, "", text); print ".TP\n.B " flag "\n" text; next }
    /^$/ { if (!opts) print ".PP"; next }
    { print }' | esc | sed -e 's/^\\&\.\(TP\|PP\|B\|nf\|fi\)/.\1/'
done
cat <<'TAIL'
.SH EXIT STATUS
.TP
.B 0
success
.TP
.B 1
no feasible plan (the closest plans are shown, with what would make them fit)
.TP
.B 2
bad input: one line names the file, the field or line:column, and what was expected
.TP
.B 3
internal error or a run that did not complete
.SH FILES
The built\-in model, cluster, device and calibration files are compiled into the library; the
documentation of every input and output format is in the docs/ folder of the source tree (docs/json.md
for the \fB\-\-json\fR documents).
.SH SEE ALSO
The README and docs/ of the autopar source tree.
TAIL
