#!/bin/sh
# vsphere-gpu-cluster: the node firewall's control-plane set follows etcd's membership
# (components/k8s/node_bootstrap/firewall.py says why a local sync and not Calico host endpoints).
#
# Control-plane nodes only, every few seconds (gpucluster-firewall-sync.timer): asks the local etcd
# member for the member list through its gRPC gateway (`/v3/cluster/member/list`, on by default
# in etcd 3.4+), with kubeadm's health-check client certificate, and replaces the `control_plane`
# set's elements with the members' peer addresses in one nft transaction. A member that
# `kubeadm join` has just added (MemberAdd, before its etcd starts) is listed with its peer URL,
# so the old members let its peer connections in before it dials them. When etcd does not answer
# (not started yet, no quorum) or lists no address, the set stays as it is: never emptied.
set -eu

local_member=127.0.0.1  # kubeadm's etcd listens for clients on the loopback address too
endpoint=${GPUCLUSTER_ETCD_ENDPOINT:-"https://$local_member:2379"}
pki=${GPUCLUSTER_ETCD_PKI:-/etc/kubernetes/pki/etcd}
nft=${GPUCLUSTER_NFT:-/usr/sbin/nft}
table=gpucluster

if ! members=$(curl -sf --connect-timeout 2 --max-time 5 \
  --cacert "$pki/ca.crt" --cert "$pki/healthcheck-client.crt" --key "$pki/healthcheck-client.key" \
  -X POST -d '{}' "$endpoint/v3/cluster/member/list"); then
  echo "gpucluster-firewall-sync: etcd at $endpoint did not answer; the control-plane set stays" >&2
  exit 0
fi

# Each member's "peerURLs": a list of scheme://address:2380 strings; the IPv4 hosts, once each.
addresses=$(printf '%s' "$members" | tr -d ' \n' | grep -o '"peerURLs":\[[^]]*\]' |
  grep -oE '//[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+' | cut -c3- | sort -u | paste -sd, -) || true
if [ -z "$addresses" ]; then
  echo "gpucluster-firewall-sync: etcd listed no peer address; the control-plane set stays" >&2
  exit 0
fi

printf 'flush set inet %s control_plane\nadd element inet %s control_plane { %s }\n' \
  "$table" "$table" "$addresses" | "$nft" -f -
