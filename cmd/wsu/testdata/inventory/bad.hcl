group "windows" {
  hosts = ["win01", "win[01:03]"]
}

group "k8s" {
  children = ["windwos"]
}
