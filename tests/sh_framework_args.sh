#!/bin/sh
# The frameworks' own definitions the export tests check against (tests/data/framework_args.tsv) are what
# tools/framework_args/extract.py reads from the sources at the commits the table names: where fetched copies
# of Megatron-LM, DeepSpeed and torchtitan are at hand (AUTOPAR_MIRRORS, default ../.mirror, each OWNER+NAME/repo
# as the fetch tool leaves it) and at those commits, the table is regenerated and must be the committed one
# byte for byte; where they are not, the case is skipped with a note (the committed table is the offline form).
# Prints TAP lines. Usage: tests/sh_framework_args.sh [BIN]
mirrors=${AUTOPAR_MIRRORS:-../.mirror}
table=tests/data/framework_args.tsv
mg=$mirrors/NVIDIA+Megatron-LM/repo
ds=$mirrors/deepspeedai+DeepSpeed/repo
tt=$mirrors/pytorch+torchtitan/repo
if ! command -v python3 >/dev/null 2>&1 || ! command -v git >/dev/null 2>&1; then
  echo "ok 1 - # SKIP python3 or git is not installed"
  exit 0
fi
n=0
for pair in "megatron:$mg" "deepspeed:$ds" "torchtitan:$tt"; do
  fw=${pair%%:*}
  dir=${pair#*:}
  want=$(awk -F'\t' -v f="$fw" '$1 == "meta" && $2 == f { sub(/.*@/, "", $3); print $3 }' "$table")
  n=$((n + 1))
  if [ ! -d "$dir" ]; then
    echo "ok $n - # SKIP no fetched copy of $fw at $dir (set AUTOPAR_MIRRORS); the committed table stands"
    missing=1
    continue
  fi
  have=$(git --git-dir "$dir" rev-parse HEAD 2>/dev/null)
  if [ "$have" != "$want" ]; then
    echo "ok $n - # SKIP the copy of $fw at $dir is at $have, the table at $want"
    missing=1
    continue
  fi
  echo "ok $n - the fetched copy of $fw is at the table's commit ${want%"${want#????????}"}"
done
n=$((n + 1))
if [ -n "$missing" ]; then
  echo "ok $n - # SKIP the table is not regenerated without all three copies at their commits"
  exit 0
fi
tmp=$(mktemp)
if python3 tools/framework_args/extract.py "$mg" "$ds" "$tt" >"$tmp" 2>"$tmp.err" && cmp -s "$tmp" "$table"; then
  echo "ok $n - tools/framework_args/extract.py reproduces $table ($(wc -l <"$table") rows)"
else
  echo "not ok $n - tools/framework_args/extract.py does not reproduce $table:"
  diff "$table" "$tmp" | head -20 | sed 's/^/#   /'
  sed 's/^/#   /' "$tmp.err" | head -5
fi
rm -f "$tmp" "$tmp.err"
