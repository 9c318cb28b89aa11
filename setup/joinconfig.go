package setup

import (
	"fmt"
	"regexp"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/kubeadmconfig"
)

// JoinConfigFlag is the option that reads a kubeadm JoinConfiguration into
// join's variables.
const JoinConfigFlag = "--join-config"

// readJoinConfig reads --join-config (Inputs.JoinConfig) into a value file
// for the engine. Its token is registered with the run's scrubber, and the
// run's Text holds the file with every token masked, so no diagnostic or
// source line shown can carry it, even from a file that does not parse.
func (r *Run) readJoinConfig(path string) (*engine.ValueFile, hcl.Diagnostics) {
	src, err := r.files.Read(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the join configuration",
			Detail: fmt.Sprintf("Reading %s %s: %s.", JoinConfigFlag, path, err)}}
	}
	j, diags := kubeadmconfig.Parse(path, src)
	for _, tok := range tokenRe.FindAll(src, -1) { // also from a file that does not parse
		r.Secrets.Add(string(tok))
	}
	var secrets []hcl.Range
	if j != nil {
		r.Secrets.Add(j.Token)
		secrets = j.Secrets
	}
	r.Text[path] = maskTokens(src, secrets)
	if diags.HasErrors() {
		return nil, diags
	}
	vf := &engine.ValueFile{Path: path, Flag: JoinConfigFlag, Src: src}
	for _, v := range j.Variables() {
		vf.Values = append(vf.Values, engine.FileValue{Name: v.Name, Value: v.Value, Range: v.Range, Secret: v.Secret})
	}
	return vf, diags
}

// tokenLineRe finds the value of a line setting token or tlsBootstrapToken,
// and tokenRe a bootstrap token anywhere: what is masked when the file
// could not be read far enough to know where its token is.
var (
	tokenLineRe = regexp.MustCompile(`(?m)^[ \t-]*"?(?:token|tlsBootstrapToken)"?[ \t]*:[ \t]*([^\r\n]+)`)
	tokenRe     = regexp.MustCompile(`[a-z0-9]{6}\.[a-z0-9]{16}`)
)

// maskTokens is src with the bytes of each secret range, each token-like
// value and each token line's value replaced by '*': the same length, so
// every position diagnostics hold still points at the same place.
func maskTokens(src []byte, secrets []hcl.Range) []byte {
	out := append([]byte(nil), src...)
	mask := func(from, to int) {
		for i := max(from, 0); i < min(to, len(out)); i++ {
			out[i] = '*'
		}
	}
	for _, r := range secrets {
		mask(r.Start.Byte, r.End.Byte)
	}
	for _, m := range tokenLineRe.FindAllSubmatchIndex(src, -1) {
		mask(m[2], m[3])
	}
	for _, m := range tokenRe.FindAllIndex(src, -1) {
		mask(m[0], m[1])
	}
	return out
}
