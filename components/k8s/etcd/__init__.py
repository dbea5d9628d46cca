"""A control-plane node's etcd member: reading members through the gateway, removing one safely, and the resource that does it when a node leaves."""
