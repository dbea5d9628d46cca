#!/bin/sh
# The fabric check's verdict, run in the launcher right after all_reduce_perf (POSIX sh + awk:
# the nccl-tests image has no Python). It reads the run's log and exits 1 when
#   - NCCL used another network than the job asked for (a RoCE run that fell back to sockets),
#   - over RoCE, the peak bus bandwidth is below MIN_SHARE of the link rate,
#   - the test reported wrong values, or printed no result rows at all,
#   - given WORKERS and RANKS: fewer ranks or workers ran than the job has, or a worker whose
#     NCCL listed no device of the job's transport (its NIC carried nothing).
# Formats read (NVIDIA/nccl debug.cc, net_ib.cc, net_socket.cc, init.cc; NVIDIA/nccl-tests common.cu):
#   <host>:<pid>:<tid> [<dev>] NCCL INFO NET/IB : Using [0]vmw_pvrdma0:1/RoCE ; OOB eth0:10.244.1.7<0>
#   <host>:<pid>:<tid> [<dev>] NCCL INFO NET/Socket : Using [0]rdma0:192.168.0.51<0>
#   <host>:<pid>:<tid> [<dev>] NCCL INFO Using network IB
#   #  Rank  3 Group  0 Pid     42 on <host> device  1 [0000:0c:00] <GPU name>
#      size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong
#   # Out of bounds values : 0 OK
#   # Avg bus bandwidth    : 10.9345
# usage: fabric_verdict.sh roce|tcp LINK_GBPS MIN_SHARE LOGFILE [WORKERS RANKS]
set -eu
if [ "$#" -ne 4 ] && [ "$#" -ne 6 ]; then
  echo "usage: $0 roce|tcp LINK_GBPS MIN_SHARE LOGFILE [WORKERS RANKS]" >&2
  exit 2
fi
exec awk -v want="$1" -v gbps="$2" -v share="$3" -v workers="${5:-}" -v ranks="${6:-}" '
/NCCL INFO Using network / { n = $0; sub(/.*NCCL INFO Using network /, "", n); sub(/[ \r].*/, "", n); net = n }
/NCCL INFO NET\/IB : Using \[/ { ib = 1; h = $0; sub(/:.*/, "", h); ibhost[h] = 1 }
/NCCL INFO NET\/Socket : Using \[/ { sock = 1; h = $0; sub(/:.*/, "", h); sockhost[h] = 1 }
/^#[ \t]+Rank[ \t]+[0-9]+ Group/ {
  for (i = 1; i < NF; i++) if ($i == "on") { h = $(i + 1); if (!(h in ranked)) { ranked[h] = 1; hosts++ }; nranks++; break }
}
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
  if (workers != "") {
    if (nranks < ranks + 0 || hosts < workers + 0) {
      printf "fabric check: %d rank(s) on %d worker(s) ran, this job has %d on %d: part of the fabric was not tested\n", nranks, hosts, ranks, workers
      fail = 1
    }
    silent = ""
    for (h in ranked) {
      if (want == "roce") seen = (h in ibhost); else seen = (h in sockhost)
      if (!seen) silent = silent " " h
    }
    if (got == want && silent != "") {
      printf "fabric check: no %s device line from%s: its NIC carried nothing\n", (want == "roce") ? "NET/IB" : "NET/Socket", silent
      fail = 1
    } else if (got == want && nranks >= ranks + 0 && hosts >= workers + 0) {
      printf "fabric check: %d ranks on %d workers, each through its own device\n", nranks, hosts
    }
  }
  print (fail ? "fabric check: FAIL" : "fabric check: PASS")
  exit fail
}
' "$4"
