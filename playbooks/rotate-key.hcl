# rotate-key: replace the SSH key the Windows hosts accept, one host at a
# time, never leaving a host that accepts neither key. On each host, logged
# in with the current key: add the new public key to the administrators'
# authorized keys file (with the ACL Windows OpenSSH requires of it, set
# through the agent, not icacls), log in again on a second connection with
# only the new key, and only then remove the key this run logged in with.
# A host that refuses the new key keeps the old one and fails, and the run
# stops there.
#
#   wsu apply rotate-key -i inventory.ini -var new_private_key_file=~/.ssh/wsu-2027
#
# Then give the inventory the new key (ansible_ssh_private_key_file, or the
# Secret's private-key.pem for -i k8s://...). A re-run with the new key in
# the inventory changes nothing.

variable "new_private_key" {
  type        = string
  default     = null
  sensitive   = true
  description = "The new private key's text (OpenSSH or PEM, unencrypted). With -i k8s://NAMESPACE/NAME it defaults to the Secret cloud-private-key's private-key.pem.new. Give this or new_private_key_file."
}

variable "new_private_key_file" {
  type        = string
  default     = null
  description = "File on the machine running wsu holding the new private key (instead of new_private_key)."
}

variable "authorized_keys_file" {
  type        = string
  default     = "C:\\ProgramData\\ssh\\administrators_authorized_keys"
  description = "The file the hosts' sshd reads the login user's keys from: for members of Administrators, Windows OpenSSH's administrators_authorized_keys (whose ACL this playbook restricts to SYSTEM and Administrators)."
}

variable "old_public_key" {
  type        = string
  default     = null
  description = "The public key to remove once the new one works. Default: the key this run logged in with, which the SSH transport knows when the inventory names the key (a key file or ssh_private_key); give it when logging in through an ssh-agent or with a password."
}

locals {
  new_key = var.new_private_key_file != null ? file(var.new_private_key_file) : var.new_private_key
  # The key to remove: the one given, else the one this run logged in with
  # (null when the transport cannot name it).
  old_key = (var.old_public_key != null ? ssh_public_key(var.old_public_key)
  : task["log in with new key"].login_public_key)
}

play "rotate" {
  hosts               = "windows"
  serial              = 1
  max_fail_percentage = 0

  task "new key given" {
    assert {
      that         = [local.new_key != null]
      fail_message = "No new key: set new_private_key_file or new_private_key (or, with -i k8s://..., put it in the Secret cloud-private-key as private-key.pem.new)."
    }
  }

  task "authorize new key" {
    win_authorized_key {
      key  = ssh_public_key(local.new_key)
      path = var.authorized_keys_file
    }
  }

  task "log in with new key" {
    ssh_key_check {
      private_key = local.new_key
    }
  }

  task "old key known" {
    assert {
      that         = [local.old_key != null]
      fail_message = "The new key is authorized and works, but this run logged in without a key it can name (ssh-agent, password), so it cannot tell which key to remove: run again with -var old_public_key=\"ssh-... \"."
    }
  }

  task "remove old key" {
    # Nothing to remove when this run already logged in with the new key
    # (a re-run after the switch).
    when = local.old_key != task["log in with new key"].public_key
    win_authorized_key {
      key   = local.old_key
      state = "absent"
      path  = var.authorized_keys_file
    }
  }
}
