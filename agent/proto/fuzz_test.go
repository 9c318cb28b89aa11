package proto

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder in either mode. It must
// fail cleanly, never panic, and every frame it accepts must re-encode to a
// frame that decodes the same.
func FuzzDecode(f *testing.F) {
	for _, fr := range sampleFrames() {
		if len(fr.Payload) > 4096 {
			continue // keep the corpus small
		}
		f.Add(encodeAll(f, ModeBinary, fr), false)
		f.Add(encodeAll(f, ModeBase64, fr), true)
	}
	f.Add(encodeAll(f, ModeBinary, sampleFrames()[:3]...), false)
	f.Add([]byte("\r\n"+string(encodeAll(f, ModeBase64, sampleFrames()[1]))), true)
	f.Add(header(headerLen+MaxPayload+1, 4, 1), false)

	f.Fuzz(func(t *testing.T, data []byte, b64 bool) {
		mode := ModeBinary
		if b64 {
			mode = ModeBase64
		}
		dec := NewDecoder(bytes.NewReader(data), mode)
		for {
			fr, err := dec.Decode()
			if err != nil {
				return
			}
			if !fr.Kind.valid() || len(fr.Payload) > MaxPayload {
				t.Fatalf("decoded an invalid frame: kind %d, %d bytes", fr.Kind, len(fr.Payload))
			}
			var buf bytes.Buffer
			if err := NewEncoder(&buf, mode).Encode(fr); err != nil {
				t.Fatalf("re-encoding a decoded frame: %v", err)
			}
			again, err := NewDecoder(&buf, mode).Decode()
			if err != nil {
				t.Fatalf("decoding a re-encoded frame: %v", err)
			}
			if again.Kind != fr.Kind || again.ID != fr.ID || !bytes.Equal(again.Payload, fr.Payload) {
				t.Fatalf("round trip changed the frame: %+v → %+v", fr, again)
			}
		}
	})
}
