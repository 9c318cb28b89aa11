# upgrade: bring joined nodes to a new payload, one node at a time:
# cordon, drain, copy the new payload (services whose binaries change are
# stopped and started again), reconfigure, wait Ready, uncordon, annotate.
# The first node that fails stops the upgrade.
#
#   wsu apply upgrade -i inventory.ini -var payload_dir=/srv/payload-4.19

include "node" {
  source              = "./upgrade-node.hcl"
  hosts               = "windows"
  serial              = 1
  max_fail_percentage = 0
}
