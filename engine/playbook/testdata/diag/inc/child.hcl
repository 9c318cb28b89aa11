variable "port" {
  type    = number
  default = 80
}

output "address" {
  value = "0.0.0.0:${var.port}"
}
