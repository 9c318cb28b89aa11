# An HCL inventory: two Windows hosts over SSH and a control-plane host.
group "all" {
  vars = { ntp_server = "pool.ntp.org" }
}

group "windows" {
  vars = {
    connection   = "ssh"
    ansible_user = "Administrator"
  }
  host "win01" {
    ansible_host = "10.0.0.11"
    max_pods     = 110
  }
  hosts = ["win[02:03].example.com"]
}

group "cluster" {
  children = ["windows"]
}
