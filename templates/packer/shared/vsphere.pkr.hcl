# What both template builds share (templates/packer/base and templates/packer/gpu): the plugin, the
# vCenter connection and placement, the snapshot name, the seal. Each build folder links this file
# (vsphere.pkr.hcl -> ../shared/vsphere.pkr.hcl): Packer reads every *.pkr.hcl of the folder it
# builds, a link to a file included (hashicorp/packer hcl2template/utils.go GetHCL2Files), so the
# two builds declare these once. One site file sets them for both:
#   packer build -var-file=site.pkrvars.hcl templates/packer/base   (then templates/packer/gpu)

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
  type        = string
  default     = "templates"
  description = "VM folder for the templates (must exist)."
}

variable "network" {
  type        = string
  description = "The build VMs' network: managementNetwork.networkName, with DHCP and a route to the package mirrors."
}

variable "snapshot_name" {
  type        = string
  default     = "base"
  description = "vcenter.templateSnapshot: linked clones need exactly this one snapshot."
}

locals {
  # The build user goes with the shutdown, and cloud-init forgets this boot: each clone is a new
  # instance that reads its own guestinfo.
  seal_command = "echo packer | sudo -S sh -c 'cloud-init clean --logs --seed && userdel -rf packer && shutdown -P now'"
}
