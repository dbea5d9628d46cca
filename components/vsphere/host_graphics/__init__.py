"""An ESXi host's default graphics type (Shared Direct for vGPU): the resource and its vCenter calls."""
