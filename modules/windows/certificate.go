package windows

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Certificate makes a LocalMachine certificate store trust a CA bundle:
// each certificate of the bundle is added unless the store has it, and
// the certificates wsu added earlier that the bundle no longer holds are
// removed. What wsu added is recorded in the registry (HKLM\SOFTWARE\wsu),
// so a certificate someone else put there is never removed, even when it
// is also in the bundle. Certificates are compared by thumbprint.
type Certificate struct{}

var (
	_ modules.Module    = Certificate{}
	_ modules.Validator = Certificate{}
)

// CertTrackKey is where win_certificate records the thumbprints it added,
// one REG_MULTI_SZ value per store.
const CertTrackKey = `HKLM\SOFTWARE\wsu\Certificates`

var certResults = []modules.Attribute{
	{Name: "thumbprints", Type: cty.List(cty.String), Description: "The bundle's certificates (SHA-1 thumbprints, upper-case hex), in bundle order."},
	{Name: "added", Type: cty.List(cty.String), Description: "Thumbprints this task adds."},
	{Name: "removed", Type: cty.List(cty.String), Description: "Thumbprints wsu had added that this task removes."},
}

func (Certificate) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_certificate",
		Summary: "Trust a PEM CA bundle in a Windows LocalMachine certificate store (Root by default).",
		Description: "Ansible's win_certificate_store for a bundle, through the agent's certificate store " +
			"calls (crypt32; no PowerShell, no certutil). Each certificate of `bundle` missing from the " +
			"LocalMachine `store` is added; certificates wsu added to that store earlier and no longer in " +
			"the bundle are removed. wsu records what it added under `" + CertTrackKey + "` (a " +
			"REG_MULTI_SZ named after the store), so a certificate it did not add is never removed, " +
			"even if a later bundle drops it. An empty bundle removes everything wsu added. " +
			"Certificates are compared by SHA-1 thumbprint, as Windows names them. kubelet, containerd " +
			"and Windows' HTTP stack read the Root store, so a registry or proxy signed by the bundle's CA " +
			"is trusted without restarting them.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "bundle", Type: cty.String, Required: true,
				Description: "PEM certificates (`-----BEGIN CERTIFICATE-----` blocks; anything between them is ignored). May be empty."},
			{Name: "store", Type: cty.String, Default: cty.StringVal("ROOT"),
				Description: "LocalMachine system store name: `ROOT` (trusted roots) or `CA` (intermediates)."},
		},
		Results: certResults,
		Example: `task "trusted ca" {
  win_certificate {
    bundle = file("ca-bundle.crt")
  }
}`,
	}
}

// bundleCert is one certificate of the bundle.
type bundleCert struct {
	der        []byte
	thumbprint string
	subject    string
}

// parseBundle reads the PEM certificates of a bundle, once each.
func parseBundle(text string) ([]bundleCert, error) {
	var out []bundleCert
	rest := []byte(text)
	for n := 1; ; n++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %s, not a CERTIFICATE", n, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %v", n, err)
		}
		tp := host.Thumbprint(b.Bytes)
		if slices.ContainsFunc(out, func(x bundleCert) bool { return x.thumbprint == tp }) {
			continue
		}
		out = append(out, bundleCert{der: b.Bytes, thumbprint: tp, subject: c.Subject.String()})
	}
	if strings.Contains(string(rest), "-----BEGIN") {
		return nil, fmt.Errorf("a PEM block after certificate %d is malformed", len(out))
	}
	return out, nil
}

func (Certificate) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	if s, ok := str(get(cfg, "store")); ok {
		if err := host.CheckStoreName(s); err != nil {
			diags = append(diags, cfg.Error("store", "Invalid certificate store", err.Error()))
		}
	}
	if b, ok := str(get(cfg, "bundle")); ok {
		if _, err := parseBundle(b); err != nil {
			diags = append(diags, cfg.Error("bundle", "Invalid CA bundle", err.Error()))
		}
	}
	return diags
}

// certState is the store, what wsu recorded, and what the task does.
type certState struct {
	bundle  []bundleCert
	tracked []string // thumbprints wsu added, as recorded
	add     []bundleCert
	remove  []string
	record  []string // the record afterwards
}

func (s *certState) thumbprints() []string {
	out := make([]string, len(s.bundle))
	for i, c := range s.bundle {
		out[i] = c.thumbprint
	}
	return out
}

func (s *certState) result() cty.Value {
	added := make([]string, len(s.add))
	for i, c := range s.add {
		added[i] = c.thumbprint
	}
	return result(certResults, map[string]cty.Value{"thumbprints": listVal(s.thumbprints()), "added": listVal(added), "removed": listVal(s.remove)})
}

// read works out the task from the store and the record.
func (Certificate) read(ctx context.Context, h host.Host, cfg modules.Config) (*certState, host.CertStore, hcl.Diagnostics) {
	store, _ := str(get(cfg, "store"))
	text, _ := str(get(cfg, "bundle"))
	if diags := onWindows(ctx, h, cfg, "store"); diags.HasErrors() {
		return nil, nil, diags
	}
	cs, ok := h.(host.CertStore)
	if !ok {
		return nil, nil, hostError(cfg, "store", "", host.NotSupported("certificate store", "this connection"))
	}
	bundle, err := parseBundle(text)
	if err != nil {
		return nil, nil, hcl.Diagnostics{cfg.Error("bundle", "Invalid CA bundle", err.Error())}
	}
	have, err := cs.Certificates(ctx, store)
	if err != nil {
		return nil, nil, hostError(cfg, "store", "Cannot list the certificate store", err)
	}
	rec, err := h.RegistryGet(ctx, CertTrackKey, strings.ToUpper(store))
	if err != nil {
		return nil, nil, hostError(cfg, "store", "Cannot read wsu's record of the certificates it added", err)
	}
	s := &certState{bundle: bundle, tracked: rec.Strings}
	inStore := func(tp string) bool { return slices.Contains(have, tp) }
	wanted := s.thumbprints()
	for _, c := range bundle {
		switch {
		case !inStore(c.thumbprint):
			s.add = append(s.add, c)
			s.record = append(s.record, c.thumbprint)
		case slices.Contains(s.tracked, c.thumbprint):
			s.record = append(s.record, c.thumbprint) // still ours
		}
	}
	for _, tp := range s.tracked {
		if !slices.Contains(wanted, tp) && inStore(tp) {
			s.remove = append(s.remove, tp)
		}
	}
	return s, cs, nil
}

// recordChanged: the record must be rewritten even when the store is
// right (a certificate of ours someone removed by hand is forgotten).
func (s *certState) recordChanged() bool { return !slices.Equal(s.tracked, s.record) }

func (m Certificate) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "bundle", "store"); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(certResults), Change: &modules.Change{Action: modules.Update, Subject: knownAfterApply}}
	}
	s, _, diags := m.read(ctx, req.Host, cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(certResults), Diagnostics: diags}
	}
	if len(s.add) == 0 && len(s.remove) == 0 && !s.recordChanged() {
		return modules.PlanResponse{Result: s.result()}
	}
	store, _ := str(get(cfg, "store"))
	ch := &modules.Change{Action: modules.Update, Subject: `LocalMachine\` + strings.ToUpper(store)}
	for _, c := range s.add {
		ch.Fields = append(ch.Fields, modules.FieldChange{Name: c.thumbprint, Old: cty.NullVal(cty.String), New: cty.StringVal(c.subject)})
	}
	for _, tp := range s.remove {
		ch.Fields = append(ch.Fields, modules.FieldChange{Name: tp, Old: cty.StringVal("added by wsu"), New: cty.NullVal(cty.String)})
	}
	if len(ch.Fields) == 0 {
		ch.Fields = append(ch.Fields, modules.FieldChange{Name: "record", Old: listVal(s.tracked), New: listVal(s.record)})
	}
	return modules.PlanResponse{Result: s.result(), Change: ch}
}

func (m Certificate) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	h := req.Host
	s, cs, diags := m.read(ctx, h, cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(certResults), Diagnostics: diags}
	}
	store, _ := str(get(cfg, "store"))
	// The record first, so a certificate added and then cut off by a lost
	// connection is still known to be ours next time.
	union := append(slices.Clone(s.record), s.remove...)
	if err := writeRecord(ctx, h, store, union); err != nil {
		return modules.ApplyResponse{Result: s.result(), Diagnostics: hostError(cfg, "store", "Cannot record the certificates wsu adds", err)}
	}
	for _, c := range s.add {
		if err := cs.AddCertificate(ctx, store, c.der); err != nil {
			return modules.ApplyResponse{Result: s.result(), Diagnostics: hostError(cfg, "bundle", "Cannot add certificate "+c.subject, err)}
		}
	}
	for _, tp := range s.remove {
		if err := cs.DeleteCertificate(ctx, store, tp); err != nil {
			return modules.ApplyResponse{Result: s.result(), Diagnostics: hostError(cfg, "store", "Cannot remove certificate "+tp, err)}
		}
	}
	if err := writeRecord(ctx, h, store, s.record); err != nil {
		return modules.ApplyResponse{Result: s.result(), Diagnostics: hostError(cfg, "store", "Cannot record the certificates wsu added", err)}
	}
	return modules.ApplyResponse{Result: s.result()}
}

// writeRecord stores the thumbprints wsu added; none deletes the value.
func writeRecord(ctx context.Context, h host.Host, store string, tps []string) error {
	name := strings.ToUpper(store)
	if len(tps) == 0 {
		return h.RegistryDelete(ctx, CertTrackKey, name)
	}
	return h.RegistrySet(ctx, CertTrackKey, name, host.RegistryValue{Exists: true, Type: host.RegMultiSZ, Strings: tps})
}
