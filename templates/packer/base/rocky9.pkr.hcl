# vcenter.template: the Rocky Linux 9 node guest, installed from templates/rocky9/ks.cfg by
# vsphere-iso, sealed (cloud-init clean), snapshot `base` taken, converted to a template.
# templates/README.md: the checklist this satisfies and how to run it:
#   packer init templates/packer/base
#   packer build -var-file=site.pkrvars.hcl templates/packer/base
# Option names: packer-plugin-vsphere, builder/vsphere/iso and builder/vsphere/common
# (HardwareConfig, CreateConfig, StorageConfig, create_snapshot/snapshot_name, convert_to_template).
# The plugin, the vCenter variables and the seal are in vsphere.pkr.hcl, a link to
# ../shared/vsphere.pkr.hcl (the same file in both builds).

variable "iso_path" {
  type        = string
  description = "Rocky Linux 9 boot or minimal ISO on a datastore, e.g. [datastore1] iso/Rocky-9-latest-x86_64-boot.iso."
}

variable "template_name" {
  type        = string
  default     = "rocky9-k8s-gpu-template"
  description = "vcenter.template of the stack."
}

variable "hardware_version" {
  type        = number
  default     = 19
  description = "vm.hardwareVersion: the clones keep the template's (vSphere never downgrades)."
}

variable "disk_gb" {
  type        = number
  default     = 50
  description = "Linked clones keep the template's disk: at least the stack's diskGb."
}

source "vsphere-iso" "rocky9" {
  vcenter_server      = var.vcenter_server
  username            = var.vcenter_user
  password            = var.vcenter_password
  insecure_connection = var.insecure_connection
  datacenter          = var.datacenter
  cluster             = var.cluster
  datastore           = var.datastore
  folder              = var.folder

  vm_name       = var.template_name
  guest_os_type = "rockylinux_64Guest"
  vm_version    = var.hardware_version
  # EFI: a large-BAR vGPU (A100, every board but T4, M10, M60) powers on only in an EFI guest, and
  # the GPU template is a clone of this one (components/vsphere/vgpu_profiles.py).
  firmware = "efi"
  CPUs     = 2
  RAM      = 4096

  disk_controller_type = ["pvscsi"]
  storage {
    disk_size             = var.disk_gb * 1024
    disk_thin_provisioned = true
  }
  network_adapters {
    network      = var.network
    network_card = "vmxnet3"
  }

  iso_paths = [var.iso_path]
  # Anaconda finds ks.cfg on the disc labelled OEMDRV by itself; inst.ks names it anyway.
  cd_files = ["${path.root}/../../rocky9/ks.cfg"]
  cd_label = "OEMDRV"
  boot_wait = "5s"
  boot_command = [
    "<up>e<down><down><end> inst.text inst.ks=hd:LABEL=OEMDRV:/ks.cfg<leftCtrlOn>x<leftCtrlOff>",
  ]

  ssh_username = "packer"
  ssh_password = "packer"
  ssh_timeout  = "45m"
  shutdown_command = local.seal_command # ../shared/vsphere.pkr.hcl

  create_snapshot     = true
  snapshot_name       = var.snapshot_name
  convert_to_template = true
}

build {
  sources = ["source.vsphere-iso.rocky9"]

  provisioner "shell" {
    execute_command = "echo packer | sudo -S sh -eu '{{ .Path }}'"
    inline = [
      # What the node bootstrap (components/k8s/node_bootstrap) relies on, checked before sealing.
      "cloud-init --version",
      "test -f /etc/cloud/cloud.cfg.d/99-vsphere-gpu-cluster.cfg",
      "systemctl is-enabled vmtoolsd containerd kubelet",
      "grep -q 'SystemdCgroup = true' /etc/containerd/config.toml",
      "kubeadm version -o short",
      "command -v ibv_devinfo",
      "/usr/sbin/nft --version",
      "! swapon --show=NAME --noheadings | grep -q .",
    ]
  }
}
