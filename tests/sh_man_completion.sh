#!/bin/sh
# The manual page and the bash completion follow the binary's own help texts: every command of
# `autopar --help` has a section in the page, every option of a command's --help is in it, and the
# completion offers the commands and a command's options. Prints TAP lines. Usage: tests/sh_man_completion.sh BIN
bin=${1:-bin/autopar}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
check() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fi; }
sh tools/mkman.sh "$bin" >"$tmp/autopar.1"
check "mkman writes a page with a title" "grep -q '^\.TH AUTOPAR 1' $tmp/autopar.1"
cmds=$("$bin" --help | sed -n '/^commands:/,/^$/s/^  \([a-z-]*\) .*/\1/p')
check "the help lists commands" "[ -n \"$cmds\" ]"
for c in $cmds; do
  check "man page has a section for $c" "grep -q '^\.SS autopar $c\$' $tmp/autopar.1"
  for o in $("$bin" "$c" --help 2>&1 | sed -n 's/^  \(--[a-z0-9-]*\).*/\1/p'); do
    oe=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
    grep -q "^\.B $oe" "$tmp/autopar.1" || { echo "not ok $((n + 1)) - man page lacks $c $o"; n=$((n + 1)); }
  done
done
if command -v groff >/dev/null 2>&1; then
  check "groff renders the page without warnings" "[ -z \"\$(groff -man -Tutf8 -ww $tmp/autopar.1 2>&1 >/dev/null | grep -v 'invalid input character')\" ]"
fi
if command -v bash >/dev/null 2>&1; then
  out=$(bash -c ". scripts/autopar-completion.bash; COMP_WORDS=($bin pl); COMP_CWORD=1; _autopar; echo \"\${COMPREPLY[*]}\"")
  check "completion offers the plan command" "[ \"$out\" = plan ]"
  out=$(bash -c ". scripts/autopar-completion.bash; COMP_WORDS=($bin plan --glo); COMP_CWORD=2; _autopar; echo \"\${COMPREPLY[*]}\"")
  check "completion offers plan's --global-batch-size" "[ \"$out\" = --global-batch-size ]"
  out=$(bash -c ". scripts/autopar-completion.bash; COMP_WORDS=($bin estimate --mi); COMP_CWORD=2; _autopar; echo \"\${COMPREPLY[*]}\"")
  check "completion offers estimate's --micro-batch-size and its aliases" "[ \"$out\" = '--micro-batch-size --micro-batches' ]"
  out=$(bash -c ". scripts/autopar-completion.bash; COMP_WORDS=($bin estimate --zer); COMP_CWORD=2; _autopar; echo \"\${COMPREPLY[*]}\"")
  check "completion offers --zero-stage and its alias --zero" "[ \"$out\" = '--zero-stage --zero' ]"
  out=$(bash -c ". scripts/autopar-completion.bash; COMP_WORDS=($bin plan --model llama-3-7); COMP_CWORD=3; _autopar; echo \"\${COMPREPLY[*]}\"")
  check "completion offers model presets" "[ \"$out\" = llama-3-70b ]"
fi
