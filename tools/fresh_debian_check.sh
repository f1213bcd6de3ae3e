#!/bin/sh
# The README's two commands on a fresh Debian 12 (issue 19, class 10), for real: debootstraps bookworm (minbase)
# into ROOT, installs nothing but `make` there (what a user needs to type the README's commands), copies a
# clean clone of this checkout's HEAD into ROOT/root/autopar, and runs `make -jJOBS example` then `make -jJOBS
# test` inside a chroot, as root, logging to ROOT/root/*.log. scripts/deps.sh installs every other package on
# the first make. Needs root, debootstrap and Debian's mirror; not part of make test (it downloads about 1 GB).
# Usage: tools/fresh_debian_check.sh ROOT [JOBS]
set -e
root=${1:?usage: tools/fresh_debian_check.sh ROOT [JOBS]}
jobs=${2:-4}
[ "$(id -u)" = 0 ] || { echo "fresh_debian_check: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh_debian_check: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
src=$(git rev-parse --show-toplevel)
[ -x "$root/usr/bin/apt-get" ] || debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian
cp /etc/resolv.conf "$root/etc/resolv.conf"
mounted=""
for m in proc sys dev dev/pts dev/shm; do
  mkdir -p "$root/$m"
  case $m in proc) mount -t proc proc "$root/proc" ;; sys) mount -t sysfs sys "$root/sys" ;; *) mount --bind "/$m" "$root/$m" ;; esac
  mounted="$root/$m $mounted"
done
trap 'for m in $mounted; do umount -l "$m" 2>/dev/null || true; done' EXIT
chroot "$root" sh -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq make >/dev/null'
rm -rf "$root/root/autopar"
git clone -q --no-local "$src" "$root/root/autopar"
# The tests find the shared reference data beside the checkout (../shared), when this machine has it.
[ -d "$src/../shared/reference" ] && mkdir -p "$root/root/shared" && cp -r "$src/../shared/reference" "$root/root/shared/"
set +e
chroot "$root" sh -c "cd /root/autopar && make -j$jobs example" >"$root/root/example.log" 2>&1
ex=$?
chroot "$root" sh -c "cd /root/autopar && make -j$jobs test" >"$root/root/test.log" 2>&1
te=$?
echo "fresh_debian_check: make -j$jobs example: exit $ex; make -j$jobs test: exit $te ($(tail -1 "$root/root/test.log"))"
echo "fresh_debian_check: commit $(git -C "$root/root/autopar" rev-parse --short HEAD); logs: $root/root/example.log, $root/root/test.log"
[ "$ex" = 0 ] && [ "$te" = 0 ]
