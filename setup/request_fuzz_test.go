package setup_test

import (
	"bytes"
	"testing"

	"github.com/wsu-project/wsu/setup"
)

// FuzzDecodeRequest feeds arbitrary bytes to DecodeRequest, as a Job's
// pod reads its request. It must fail cleanly, never panic, and every
// request it accepts must encode again (it holds nothing Encode refuses)
// to a request that decodes and encodes to the same bytes.
func FuzzDecodeRequest(f *testing.F) {
	packed, err := sampleRequest(f, f.TempDir()).Pack()
	if err != nil {
		f.Fatal(err)
	}
	sample, err := packed.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte(`{"apiVersion":"` + setup.RequestVersion + `","mode":"plan","inputs":{"playbook":"wsu:join.hcl"}}`))
	f.Add([]byte(`{"apiVersion":"` + setup.RequestVersion + `","mode":"apply","inputs":{"playbook":"p.hcl","vars":["a="]},` +
		`"files":{"playbook":{"p.hcl":"x"}},"secretFiles":{"vars":{"0":"/f"},"hostVars":{"k":"/g"}},"salt":"ABCD","expectHash":"ff"}`))
	f.Add([]byte(`{"apiVersion":"` + setup.RequestVersion + `","mode":"plan","inputs":{"playbook":"p"},"inventory":{"order":["h"],` +
		`"hosts":{"h":{"vars":{"v":{"type":["list","dynamic"],"value":[{"value":1,"type":"number"}]}},"groups":["ungrouped"]}},` +
		`"groups":{"all":{"hosts":["h"],"children":["ungrouped"]},"ungrouped":{"hosts":["h"]}}}}`))
	f.Add([]byte(`{"apiVersion":1}`))
	f.Add([]byte("{\n\"inventory\":{\"hosts\":{\"h\":{\"vars\":{\"v\":{\"type\":\"string\",\"value\":\"x\",\"marks\":[\"sensitive\"]}}}}}}"))

	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := setup.DecodeRequest(data)
		if err != nil {
			return
		}
		once, err := req.Encode()
		if err != nil {
			t.Fatalf("a decoded request does not encode: %v", err)
		}
		again, err := setup.DecodeRequest(once)
		if err != nil {
			t.Fatalf("an encoded request does not decode: %v\n%s", err, once)
		}
		twice, err := again.Encode()
		if err != nil {
			t.Fatalf("encoding again: %v", err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("the round trip changed the request:\n%s\n%s", once, twice)
		}
	})
}
