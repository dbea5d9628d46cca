#!/bin/sh
# The fabric check's verdict, run in the launcher right after all_reduce_perf (POSIX sh + awk:
# the nccl-tests image has no Python). It reads the run's log and exits 1 when
#   - NCCL used another network than the job asked for (a RoCE run that fell back to sockets),
#   - over RoCE, the peak bus bandwidth is below MIN_SHARE of the link rate,
#   - the test reported wrong values, or printed no result rows at all.
# Formats read (NVIDIA/nccl debug.cc, net_ib.cc, net_socket.cc, init.cc; NVIDIA/nccl-tests common.cu):
#   <host>:<pid>:<tid> [<dev>] NCCL INFO NET/IB : Using [0]vmw_pvrdma0:1/RoCE ; OOB eth0:10.244.1.7<0>
#   <host>:<pid>:<tid> [<dev>] NCCL INFO NET/Socket : Using [0]rdma0:192.168.0.51<0>
#   <host>:<pid>:<tid> [<dev>] NCCL INFO Using network IB
#      size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong
#   # Out of bounds values : 0 OK
#   # Avg bus bandwidth    : 10.9345
# usage: fabric_verdict.sh roce|tcp LINK_GBPS MIN_SHARE LOGFILE
set -eu
if [ "$#" -ne 4 ]; then
  echo "usage: $0 roce|tcp LINK_GBPS MIN_SHARE LOGFILE" >&2
  exit 2
fi
exec awk -v want="$1" -v gbps="$2" -v share="$3" '
/NCCL INFO Using network / { n = $0; sub(/.*NCCL INFO Using network /, "", n); sub(/[ \r].*/, "", n); net = n }
/NCCL INFO NET\/IB : Using \[/ { ib = 1 }
/NCCL INFO NET\/Socket : Using \[/ { sock = 1 }
/^# Out of bounds values *: / { v = $0; sub(/.*: */, "", v); sub(/ .*/, "", v); oob = v + 0 }
/^# Avg bus bandwidth *: / { v = $0; sub(/.*: */, "", v); sub(/ .*/, "", v); avg = v + 0; have_avg = 1 }
/^ *[0-9]+ +[0-9]+ +[a-z0-9_]+ +[a-z]+ +-?[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+/ {
  rows++
  if ($8 + 0 > peak) peak = $8 + 0
  if (NF >= 12 && $12 + 0 > peak) peak = $12 + 0
}
END {
  used = net
  if (used == "") used = ib ? "IB" : (sock ? "Socket" : "unknown")
  got = (used ~ /^IB/) ? "roce" : ((used ~ /^Socket/) ? "tcp" : "unknown")
  link = gbps / 8
  fail = 0
  if (got == want) {
    printf "fabric check: NCCL used network %s (%s), as this job asks\n", used, got
  } else {
    printf "fabric check: NCCL used network %s (%s), but this job asks for %s: a fallback\n", used, got, want
    fail = 1
  }
  if (rows == 0) {
    print "fabric check: no all_reduce_perf result rows in the log"
    fail = 1
  } else {
    printf "fabric check: peak bus bandwidth %.2f GB/s = %.1f %% of the %.2f GB/s link (%g Gb/s)", peak, 100 * peak / link, link, gbps
    if (have_avg) printf "; average over all sizes %.2f GB/s", avg
    printf "\n"
    if (want == "roce" && peak < share * link) {
      printf "fabric check: below the required %.0f %% of the link rate\n", 100 * share
      fail = 1
    }
  }
  if (oob > 0) {
    printf "fabric check: %d wrong values\n", oob
    fail = 1
  }
  print (fail ? "fabric check: FAIL" : "fabric check: PASS")
  exit fail
}
' "$4"
