# Sourced by benchmark scripts that need DPDK hugepages (bench/compare-ovs).
#
#   reserve_hugepages N   make sure at least N 2 MB hugepages are reserved;
#                         whatever /proc/sys/vm/nr_hugepages held before is
#                         put back when the script exits, on success, on
#                         failure, on Ctrl-C (exit 130) and on SIGTERM
#                         (exit 143).
# The caller's own clean-up goes in on_exit_also (a function name), which
# runs first.
on_exit_also=:
hugepages_before=
restore_hugepages() {
  [ -n "$hugepages_before" ] || return 0
  [ "$(cat /proc/sys/vm/nr_hugepages)" = "$hugepages_before" ] ||
    echo "$hugepages_before" > /proc/sys/vm/nr_hugepages 2>/dev/null || true
}
_hugepages_exit() {
  "$on_exit_also" || true
  restore_hugepages
}
trap _hugepages_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
reserve_hugepages() {
  hugepages_before=$(cat /proc/sys/vm/nr_hugepages)
  [ "$hugepages_before" -ge "$1" ] || echo "$1" > /proc/sys/vm/nr_hugepages
  [ "$(cat /proc/sys/vm/nr_hugepages)" -ge "$1" ] || {
    echo "cannot reserve $1 hugepages (have $(cat /proc/sys/vm/nr_hugepages))" >&2
    return 1
  }
}
