"""`verify --availability`: probe pods on every node and the control plane, and their verdict."""
