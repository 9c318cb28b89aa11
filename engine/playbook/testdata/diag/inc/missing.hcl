include "gone" {
  source = "nowhere.hcl"
}
