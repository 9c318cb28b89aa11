// Package playbooks embeds the stock playbooks in the wsu binary, so
// `wsu apply join -i INVENTORY` works without a checkout and a site playbook
// can include them as source = "wsu:join.hcl".
package playbooks

import "embed"

// FS holds the stock playbooks and their templates.
//
//go:embed *.hcl templates
var FS embed.FS
