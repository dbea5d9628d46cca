"""The Kubernetes layer: cluster bootstrap, access to the cluster, and the add-ons on top of it."""
