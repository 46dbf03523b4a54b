# Two test hosts for the launcher tests, sourced by tests/launchers/run:
# network namespaces cpx1 (node1, 10.10.0.11) and cpx2 (node2, 10.10.0.12),
# each with one veth (eth0) into a bridge cpxbr (10.10.0.1) in the root
# namespace, where mpirun and slurmctld run. Root only.
#
#   hosts_up        makes them (after deleting any left from a killed run)
#   hosts_down      deletes them
#   in_host H CMD   becomes the shell command CMD on host H (node1 or node2):
#                   nsenter into its network namespace, with its own UTS
#                   namespace so that its hostname is H. (Not `ip netns exec`:
#                   that remounts /sys, and slurmd then finds no cgroups.)
#                   It execs: call it in a subshell (`in_host ... &`, whose
#                   pid is then CMD's when CMD starts with exec) or last.

hosts_down() {
  ip netns del cpx1 2>/dev/null
  ip netns del cpx2 2>/dev/null
  ip link del cpxbr 2>/dev/null
  # The veths go with their namespaces, a moment later.
  for _ in $(seq 50); do ip link show cpxv1 >/dev/null 2>&1 || ip link show cpxv2 >/dev/null 2>&1 || break; sleep 0.1; done
  return 0
}

hosts_up() {
  hosts_down
  ip netns add cpx1 && ip netns add cpx2 && ip link add cpxbr type bridge &&
    ip addr add 10.10.0.1/24 dev cpxbr && ip link set cpxbr up || return 1
  local i
  for i in 1 2; do
    ip link add cpxv$i type veth peer name eth0 netns cpx$i &&
      ip link set cpxv$i master cpxbr && ip link set cpxv$i up &&
      ip -n cpx$i addr add 10.10.0.1$i/24 dev eth0 && ip -n cpx$i link set eth0 up &&
      ip -n cpx$i link set lo up && ip -n cpx$i route add default via 10.10.0.1 || return 1
  done
}

in_host() {
  local host=$1 ns
  shift
  case "$host" in
    node1) ns=cpx1 ;;
    node2) ns=cpx2 ;;
    *) echo "no test host $host" >&2; return 1 ;;
  esac
  exec nsenter --net=/run/netns/$ns unshare --uts sh -c "hostname $host; $*"
}
