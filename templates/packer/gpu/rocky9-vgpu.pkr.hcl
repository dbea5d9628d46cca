# vcenter.gpuTemplate: a full clone of vcenter.template (templates/packer/base) by vsphere-clone,
# with the GPU workers' vGPU devices, all memory reserved, the NVIDIA vGPU guest driver and the
# NVIDIA Container Toolkit, sealed, snapshot `base` taken, converted to a template.
# templates/README.md: the checklist this satisfies and how to run it:
#   packer init templates/packer/gpu
#   packer build -var-file=site.pkrvars.hcl templates/packer/gpu
# Build it on a host whose GPU runs in Shared Direct mode and offers the profiles: the build VM
# powers on with its vGPU. Option names: packer-plugin-vsphere, builder/vsphere/clone and
# builder/vsphere/common (HardwareConfig: vgpu_profile, RAM_reserve_all, firmware;
# configuration_parameters; create_snapshot/snapshot_name; convert_to_template).
# Several vGPUs per worker (vgpu_profiles with more than one entry): the plugin adds ONE vGPU
# (`vgpu_profile` is a string; driver/vm.go Configure adds a device to a VM without PCI devices,
# edits the one it has, and skips the reconfigure when it has more), so this build adds the first,
# installs the driver with it and leaves the VM off, unsnapshotted, not a template; then
#   python -m components.vsphere.vgpu.template_step --vm NAME --profile P1 --profile P2 ...
# adds the others and their 64-bit MMIO (EFI checked), takes the snapshot and makes it a template.
# The plugin, the vCenter variables and the seal are in vsphere.pkr.hcl, a link to
# ../shared/vsphere.pkr.hcl (the same file in both builds).

variable "base_template" {
  type        = string
  default     = "rocky9-k8s-gpu-template"
  description = "vcenter.template, built by templates/packer/base."
}

variable "template_name" {
  type        = string
  default     = "rocky9-k8s-vgpu-t4-16c"
  description = "vcenter.gpuTemplate of the stack."
}

variable "vgpu_profiles" {
  type        = list(string)
  default     = ["grid_t4-16c"]
  description = "gpuWorkers.vgpuProfiles, in order: one vGPU device each (e.g. [\"nvidia_l40s-48c\", \"nvidia_l40s-48c\"] for every GPU of a two-L40S host). This build adds the first; with more, components/vsphere/vgpu/template_step.py adds the rest."
  validation {
    condition     = length(var.vgpu_profiles) > 0
    error_message = "List at least one profile in vgpu_profiles (gpuWorkers.vgpuProfiles)."
  }
}

variable "memory_mb" {
  type        = number
  default     = 24576
  description = "gpuWorkers.memoryMb; all of it is reserved, as vGPU requires."
}

variable "mmio_size_gb" {
  type        = number
  default     = 0
  description = "0 on T4, M10, M60; else pciPassthru.64bitMMIOSizeGB for ALL of vgpu_profiles: `python -m stacks plan STACK` prints it per worker template (A100 40 GB: 128; 2 x L40S 48 GB: 256; components/vsphere/vgpu/profiles.py mmio_size_gb; templates/README.md)."
}

variable "nvidia_driver_url" {
  type        = string
  description = "The NVIDIA vGPU guest driver .run for Linux, of the release of the hosts' vGPU Manager (NVIDIA Licensing Portal)."
}

variable "nvidia_client_token_url" {
  type        = string
  default     = ""
  description = "Optional: the NLS client configuration token, installed into /etc/nvidia/ClientConfigToken/."
}

variable "nvidia_container_toolkit_version" {
  type        = string
  default     = "1.17.8"
  description = "The NVIDIA Container Toolkit release installed (dnf nvidia-container-toolkit-<version>) and recorded in the template's extraConfig; at least 1.17.8 (CVE-2025-23266): preflight and the bootstrap refuse older ones."
  validation {
    condition     = can(regex("^[0-9]+\\.[0-9]+\\.[0-9]+$", var.nvidia_container_toolkit_version))
    error_message = "The nvidia_container_toolkit_version must be a release such as 1.17.8."
  }
}

locals {
  single_vgpu     = length(var.vgpu_profiles) == 1
  build_user_data = <<-USERDATA
    #cloud-config
    users:
      - name: packer
        groups: wheel
        plain_text_passwd: packer
        lock_passwd: false
    ssh_pwauth: true
  USERDATA
}

source "vsphere-clone" "rocky9_vgpu" {
  vcenter_server      = var.vcenter_server
  username            = var.vcenter_user
  password            = var.vcenter_password
  insecure_connection = var.insecure_connection
  datacenter          = var.datacenter
  cluster             = var.cluster
  datastore           = var.datastore
  folder              = var.folder

  template     = var.base_template
  vm_name      = var.template_name
  linked_clone = false
  network      = var.network

  RAM = var.memory_mb
  # vSphere powers a vGPU VM on only with all of its memory reserved (NVIDIA vGPU user guide).
  RAM_reserve_all = true
  # The first vGPU; the template step adds the others (see the top of this file).
  vgpu_profile = var.vgpu_profiles[0]
  # The base's guest is installed for EFI; large-BAR vGPUs power on only with it.
  firmware = "efi"
  # The base template's sealed guest has no build user: cloud-init creates one from guestinfo,
  # the only datasource the guest reads (ks.cfg), as every node later reads its own. The program
  # writes guestinfo.userdata/metadata on every clone, so these build values never reach a node.
  configuration_parameters = merge(
    {
      "guestinfo.metadata"          = base64encode("instance-id: packer-vgpu-build\nlocal-hostname: packer-vgpu-build\n")
      "guestinfo.metadata.encoding" = "base64"
      "guestinfo.userdata"          = base64encode(local.build_user_data)
      "guestinfo.userdata.encoding" = "base64"
      # What preflight reads to refuse a toolkit before the CVE-2025-23266 fix (components/vsphere/
      # gpu_template.py TOOLKIT_VERSION_KEY); the provisioner checks nvidia-ctk reports this version.
      "gpucluster.nvidiaContainerToolkitVersion" = var.nvidia_container_toolkit_version
    },
    var.mmio_size_gb > 0 ? {
      "pciPassthru.use64bitMMIO"    = "TRUE"
      "pciPassthru.64bitMMIOSizeGB" = tostring(var.mmio_size_gb)
    } : {},
  )

  ssh_username     = "packer"
  ssh_password     = "packer"
  ssh_timeout      = "30m"
  shutdown_command = local.seal_command # ../shared/vsphere.pkr.hcl

  # One vGPU: this build seals the template. More: the template step adds the others first, then
  # takes the snapshot (linked clones get the devices only from a snapshot taken after them).
  create_snapshot     = local.single_vgpu
  snapshot_name       = var.snapshot_name
  convert_to_template = local.single_vgpu
}

build {
  sources = ["source.vsphere-clone.rocky9_vgpu"]

  provisioner "shell" {
    execute_command = "echo packer | sudo -S env {{ .Vars }} sh -eu '{{ .Path }}'"
    environment_vars = [
      "NVIDIA_DRIVER_URL=${var.nvidia_driver_url}",
      "NVIDIA_TOKEN_URL=${var.nvidia_client_token_url}",
      "NVIDIA_CONTAINER_TOOLKIT_VERSION=${var.nvidia_container_toolkit_version}",
    ]
    inline = [
      # The vGPU guest driver (the bootstrap stops without nvidia-smi on a GPU worker).
      "curl -fsSL -o /tmp/nvidia-vgpu.run \"$NVIDIA_DRIVER_URL\"",
      "sh /tmp/nvidia-vgpu.run --silent",
      "rm -f /tmp/nvidia-vgpu.run",
      "nvidia-smi -L",
      "if [ -n \"$NVIDIA_TOKEN_URL\" ]; then mkdir -p /etc/nvidia/ClientConfigToken && curl -fsSL -o /etc/nvidia/ClientConfigToken/client_configuration_token.tok \"$NVIDIA_TOKEN_URL\"; fi",
      "cp /etc/nvidia/gridd.conf.template /etc/nvidia/gridd.conf",
      # The NVIDIA Container Toolkit: the bootstrap adds containerd's runtime handler with nvidia-ctk.
      "curl -fsSL -o /etc/yum.repos.d/nvidia-container-toolkit.repo https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo",
      # Pinned to the version recorded in extraConfig above, and checked: the template says what it has.
      "dnf -y install \"nvidia-container-toolkit-$NVIDIA_CONTAINER_TOOLKIT_VERSION\"",
      "nvidia-ctk --version | grep -qx \"NVIDIA Container Toolkit CLI version $NVIDIA_CONTAINER_TOOLKIT_VERSION\"",
    ]
  }

  # Several vGPUs: the template step on this machine adds the others to the VM just built, then the
  # snapshot and the template (components/vsphere/vgpu/template_step.py; the repository's .venv).
  post-processor "shell-local" {
    environment_vars = [
      "VSPHERE_SERVER=${var.vcenter_server}",
      "VSPHERE_USER=${var.vcenter_user}",
      "VSPHERE_PASSWORD=${var.vcenter_password}",
      "VSPHERE_ALLOW_UNVERIFIED_SSL=${var.insecure_connection}",
    ]
    inline = local.single_vgpu ? ["echo 'one vGPU: the template is sealed'"] : [
      "cd '${path.root}/../../..' && .venv/bin/python -m components.vsphere.vgpu.template_step --vm '${var.template_name}' --snapshot '${var.snapshot_name}' ${join(" ", [for p in var.vgpu_profiles : "--profile '${p}'"])}",
    ]
  }
}
