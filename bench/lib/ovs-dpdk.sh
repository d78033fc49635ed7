# Sourced by benchmark scripts that run Open vSwitch with DPDK (OVS-DPDK)
# in a work directory of their own (bench/compare-ovs, bench/pvp,
# bench/vm-iperf); the machine's own OVS, if any, is left alone.
#
#   ovs_init WORK    OVS's database, sockets and logs under WORK (vsctl
#                    and appctl reach that OVS); notes which of the netdev
#                    datapath's taps exist already
#   ovs_start MEM [other_config:KEY=VALUE ...]
#                    a fresh database and ovs-vswitchd-dpdk: DPDK on, MEM MB
#                    of hugepage memory, the PMD on core 1, the other
#                    threads on core 0, and the settings given
#                    (with OVS_NETNS set, ovs-vswitchd runs in that network
#                    namespace: its bridges' taps are made there, where a
#                    benchmark may give them addresses)
#   ovs_stop         stops both daemons and waits until they are gone
#                    (core 1 must be free for the next run); removes the
#                    taps OVS made (not those that were there before); does
#                    nothing before ovs_init
ovs_vswitchd=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
ovs_work=
ovs_new_taps=
vsctl() { ovs-vsctl --db="unix:$ovs_work/db.sock" --timeout=60 "$@"; }
appctl() { ovs-appctl -t "$ovs_work/ovs-vswitchd.ctl" "$@"; }
# The PMD thread's "avg processing cycles per packet" since its stats were
# last cleared (dpif-netdev/pmd-stats-show), rounded.
ovs_pmd_cycles() {
  appctl dpif-netdev/pmd-stats-show | awk '/pmd thread/ {p=1} /main thread/ {p=0}
    p && /avg processing cycles per packet:/ {c=$6} END {printf "%.0f", c}'
}
ovs_init() {
  ovs_work=$1
  export OVS_RUNDIR=$ovs_work OVS_DBDIR=$ovs_work OVS_LOGDIR=$ovs_work OVS_SYSCONFDIR=$ovs_work
  # The netdev datapath's taps, which OVS does not always remove on exit.
  ovs_new_taps=
  for t in ovs-netdev br0; do [ -e "/sys/class/net/$t" ] || ovs_new_taps="$ovs_new_taps $t"; done
}
ovs_stop() {
  [ -n "$ovs_work" ] || return 0
  # exit --cleanup removes the bridges' taps (br0), which a plain SIGTERM
  # leaves behind on the machine.
  [ -f "$ovs_work/ovs-vswitchd.pid" ] && appctl --timeout=5 exit --cleanup >/dev/null 2>&1 || true
  local d pid t
  for d in ovs-vswitchd ovsdb-server; do
    [ -f "$ovs_work/$d.pid" ] || continue
    pid=$(cat "$ovs_work/$d.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$ovs_work/$d.pid"
  done
  for t in $ovs_new_taps; do ip link del "$t" 2>/dev/null || true; done
}
ovs_start() {
  local mem=$1; shift
  ovs_stop
  rm -f "$ovs_work/conf.db"
  ovsdb-tool create "$ovs_work/conf.db" /usr/share/openvswitch/vswitch.ovsschema
  ovsdb-server --detach --no-chdir --pidfile="$ovs_work/ovsdb-server.pid" --unixctl="$ovs_work/ovsdb-server.ctl" \
    --remote="punix:$ovs_work/db.sock" --log-file="$ovs_work/ovsdb-server.log" "$ovs_work/conf.db" 2>/dev/null
  vsctl --no-wait init
  vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true other_config:dpdk-extra=--no-pci \
    "other_config:dpdk-socket-mem=$mem" other_config:pmd-cpu-mask=0x2 other_config:dpdk-lcore-mask=0x1 "$@"
  ${OVS_NETNS:+ip netns exec "$OVS_NETNS"} "$ovs_vswitchd" --detach --no-chdir --mlockall --pidfile="$ovs_work/ovs-vswitchd.pid" \
    --unixctl="$ovs_work/ovs-vswitchd.ctl" --log-file="$ovs_work/ovs-vswitchd.log" "unix:$ovs_work/db.sock" >/dev/null 2>&1
}
