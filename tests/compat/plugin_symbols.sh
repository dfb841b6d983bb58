#!/usr/bin/env bash
# The released plugin asks the dynamic loader for nothing NCCL's own library does not ask for:
# for every symbol-version family (GLIBC_, GLIBCXX_, CXXABI_, GCC_) no version newer than the
# newest libnccl.so.2 needs, and no shared library that libnccl.so.2 does not list itself. That is
# what makes dlopen succeed in every container NCCL itself runs in (plugin/README.md, "Where it
# loads").
#
# Usage: plugin_symbols.sh PLUGIN_SO LIBNCCL_SO
# Exit: 0 pass, 1 a check failed, 77 skipped (no libnccl.so.2 or objdump here; says so).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PLUGIN_SO LIBNCCL_SO" >&2; exit 2; }
plugin="$1" nccl="$2"
command -v objdump >/dev/null || { echo "SKIPPED: no objdump"; exit 77; }
[ -f "$nccl" ] || { echo "SKIPPED: no $nccl to compare with"; exit 77; }
[ -f "$plugin" ] || { echo "FAIL: no plugin at $plugin"; exit 1; }

# Every version the object asks for (the dynamic symbol table's references and its verneed),
# one "FAMILY VERSION" per line.
needed_versions() {
  objdump -T "$1" | sed -n 's/.*\*UND\*[^(]*(\?\([A-Z]*_[0-9.]*\))\?.*/\1/p' | grep -E '^[A-Z]+_[0-9.]+$' || true
  objdump -p "$1" | sed -n '/Version References/,/^$/p' | awk '$NF ~ /^[A-Z]+_[0-9.]+$/ {print $NF}'
}
newest() {  # newest version of family $2 among those $1 needs (empty when none)
  { needed_versions "$1" | grep "^$2_" || true; } | sed "s/^$2_//" | sort -V | tail -1
}
needed_libs() { objdump -p "$1" | awk '$1 == "NEEDED" {print $2}' | sort -u; }

fail=0
for family in GLIBC GLIBCXX CXXABI GCC; do
  mine="$(newest "$plugin" "$family")"
  theirs="$(newest "$nccl" "$family")"
  [ -n "$mine" ] || { echo "ok   $family: none needed"; continue; }
  if [ -z "$theirs" ]; then
    echo "FAIL $family: the plugin needs ${family}_$mine, libnccl.so.2 needs no $family at all"
    fail=1
  elif [ "$(printf '%s\n%s\n' "$mine" "$theirs" | sort -V | tail -1)" != "$theirs" ]; then
    echo "FAIL $family: the plugin needs ${family}_$mine, newer than libnccl.so.2's ${family}_$theirs:"
    objdump -T "$plugin" | grep -F "${family}_$mine" | sed 's/^/       /' | head -5
    fail=1
  else
    echo "ok   $family: the plugin needs ${family}_$mine, libnccl.so.2 ${family}_$theirs"
  fi
done
extra="$(comm -23 <(needed_libs "$plugin") <(needed_libs "$nccl"))"
if [ -n "$extra" ]; then
  echo "FAIL shared libraries libnccl.so.2 does not load itself: $(echo $extra)"
  fail=1
else
  echo "ok   shared libraries: $(needed_libs "$plugin" | tr '\n' ' ')(all loaded by libnccl.so.2 too)"
fi
[ "$fail" -eq 0 ] && echo "PASS" || echo "FAIL"
exit "$fail"
