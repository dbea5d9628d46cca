"""NVIDIA vGPU devices on a VM: profiles, the device diff, power handling and the attachment resource."""
