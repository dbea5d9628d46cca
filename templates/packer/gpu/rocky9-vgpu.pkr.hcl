# vcenter.gpuTemplate: a full clone of vcenter.template (templates/packer/base) by vsphere-clone,
# with the GPU workers' vGPU device, all memory reserved, the NVIDIA vGPU guest driver and the
# NVIDIA Container Toolkit, sealed, snapshot `base` taken, converted to a template.
# templates/README.md: the checklist this satisfies and how to run it:
#   packer init templates/packer/gpu
#   packer build -var-file=site.pkrvars.hcl templates/packer/gpu
# Build it on a host whose GPU runs in Shared Direct mode and offers the profile: the build VM
# powers on with its vGPU. Option names: packer-plugin-vsphere, builder/vsphere/clone and
# builder/vsphere/common (HardwareConfig: vgpu_profile, RAM_reserve_all, firmware;
# configuration_parameters; create_snapshot/snapshot_name; convert_to_template).

packer {
  required_plugins {
    vsphere = {
      source  = "github.com/hashicorp/vsphere"
      version = ">= 1.4.0"
    }
  }
}

variable "vcenter_server" {
  type = string
}

variable "vcenter_user" {
  type = string
}

variable "vcenter_password" {
  type      = string
  sensitive = true
}

variable "insecure_connection" {
  type    = bool
  default = false
}

variable "datacenter" {
  type = string
}

variable "cluster" {
  type = string
}

variable "datastore" {
  type = string
}

variable "folder" {
  type    = string
  default = "templates"
}

variable "network" {
  type        = string
  description = "The build VM's network (DHCP), as for the base template."
}

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

variable "snapshot_name" {
  type        = string
  default     = "base"
  description = "vcenter.templateSnapshot."
}

variable "vgpu_profile" {
  type        = string
  default     = "grid_t4-16c"
  description = "gpuWorkers.vgpuProfiles (one profile: one device per worker)."
}

variable "memory_mb" {
  type        = number
  default     = 24576
  description = "gpuWorkers.memoryMb; all of it is reserved, as vGPU requires."
}

variable "mmio_size_gb" {
  type        = number
  default     = 0
  description = "0 on T4, M10, M60; else pciPassthru.64bitMMIOSizeGB (A100 40 GB: 128; components/vsphere/vgpu_profiles.py)."
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
    error_message = "nvidia_container_toolkit_version is a release such as 1.17.8."
  }
}

locals {
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
  vgpu_profile    = var.vgpu_profile
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
  shutdown_command = "echo packer | sudo -S sh -c 'cloud-init clean --logs --seed && userdel -rf packer && shutdown -P now'"

  create_snapshot     = true
  snapshot_name       = var.snapshot_name
  convert_to_template = true
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
}
