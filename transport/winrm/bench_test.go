package winrm

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	wsmantest "github.com/wsu-project/wsu/test/wsman"
	"github.com/wsu-project/wsu/transport/agentbin"
)

// BenchmarkWinRMUpload uploads a 100 MB file through the test endpoint over
// HTTPS, the way the agent is deployed: the bootstrap command's stdin, in
// envelope-sized Send messages. Goal: at least 10 MB/s.
func BenchmarkWinRMUpload(b *testing.B) {
	const size = 100 << 20
	local := filepath.Join(b.TempDir(), "payload.bin")
	f, err := os.Create(local)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for written := 0; written < size; written += len(buf) {
		rand.Read(buf)
		f.Write(buf)
	}
	f.Close()

	for _, auth := range []string{"basic", "ntlm"} {
		b.Run(auth, func(b *testing.B) {
			fx := newFixture(b, wsmantest.Options{})
			s := fx.session(b, map[string]string{"ansible_winrm_transport": auth})
			b.SetBytes(size)
			b.ResetTimer()
			var secs float64
			for range b.N {
				st, err := s.upload(context.Background(), agentbin.File(local), `C:\k\payload.bin`)
				if err != nil {
					b.Fatal(err)
				}
				secs += st.duration.Seconds()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)*size/1e6/secs, "upload-MB/s")
			b.ReportMetric(float64(fx.srv.Stats().Sends)/float64(b.N), "sends/op")
		})
	}
}
