package host

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHTTPRequestNormalize(t *testing.T) {
	r, err := HTTPRequest{URL: "http://169.254.169.254/latest/meta-data/local-hostname"}.Normalize()
	require.NoError(t, err)
	assert.Equal(t, HTTPRequest{Method: "GET", URL: "http://169.254.169.254/latest/meta-data/local-hostname",
		Timeout: DefaultHTTPTimeout, Limit: DefaultHTTPLimit}, r, "the defaults")
	for _, bad := range []HTTPRequest{
		{URL: ""}, {URL: "/relative"}, {URL: "http://"}, {URL: "ftp://h/"}, {URL: "https://h/"}, {URL: "http://u:p@h/"},
		{URL: "http://h/", Method: "get"}, {URL: "http://h/", Method: "DELETE"},
		{URL: "http://h/", Header: map[string]string{"": "x"}}, {URL: "http://h/", Header: map[string]string{"A B": "x"}},
		{URL: "http://h/", Header: map[string]string{"A": "x\ny"}},
		{URL: "http://h/", Timeout: -time.Second}, {URL: "http://h/", Timeout: MaxHTTPTimeout + 1},
		{URL: "http://h/", Limit: -1}, {URL: "http://h/", Limit: MaxHTTPBody + 1},
		{URL: "http://h/", Body: make([]byte, MaxHTTPBody+1)},
	} {
		_, err := bad.Normalize()
		assert.Error(t, err, "%+v", bad)
	}
}

// FuzzHTTPRequestNormalize: whatever a request holds, Normalize accepts
// only what DoHTTP may send (and accepts its own output unchanged), and
// its errors never quote a header value or a body.
func FuzzHTTPRequestNormalize(f *testing.F) {
	f.Add("", "http://169.254.169.254/latest/api/token", "X-aws-ec2-metadata-token-ttl-seconds", "21600", []byte(nil), int64(0), int64(0))
	f.Add("PUT", "https://metadata.google.internal/x", "Metadata-Flavor", "Google", []byte("body"), int64(time.Second), int64(10))
	f.Add("GET", "http://u:secret@h/", "A B", "tok\r\nen", []byte("x"), int64(-1), int64(-1))
	f.Fuzz(func(t *testing.T, method, rawURL, name, value string, body []byte, timeout, limit int64) {
		req := HTTPRequest{Method: method, URL: rawURL, Header: map[string]string{name: value}, Body: body,
			Timeout: time.Duration(timeout), Limit: limit}
		got, err := req.Normalize()
		if err != nil {
			for _, secret := range []string{value, string(body)} {
				if len(secret) >= 4 && !strings.Contains(method+rawURL+name, secret) {
					assert.NotContains(t, err.Error(), secret, "an error quotes a header value or the body")
				}
			}
			return
		}
		assert.True(t, slices.Contains(HTTPMethods, got.Method), "method %q", got.Method)
		u, perr := url.Parse(got.URL)
		require.NoError(t, perr)
		assert.Equal(t, "http", u.Scheme)
		assert.NotEmpty(t, u.Hostname())
		assert.Nil(t, u.User)
		assert.NotContains(t, value, "\n")
		assert.True(t, got.Timeout > 0 && got.Timeout <= MaxHTTPTimeout, "timeout %s", got.Timeout)
		assert.True(t, got.Limit > 0 && got.Limit <= MaxHTTPBody, "limit %d", got.Limit)
		again, err := got.Normalize()
		require.NoError(t, err)
		assert.Equal(t, got, again)
	})
}
