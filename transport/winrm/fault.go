package winrm

import (
	"encoding/xml"
	"errors"
	"strings"
	"sync"
)

// Fault is a SOAP fault from the WinRM service.
type Fault struct {
	Code    string // e.g. s:Receiver
	Subcode string // e.g. w:TimedOut
	Reason  string
	// Detail is the wsman faultDetail URI, if any.
	Detail string
	// WSManCode is the Windows error number of the f:WSManFault, if any.
	WSManCode string
}

func (f *Fault) Error() string {
	var b strings.Builder
	b.WriteString("WinRM fault")
	if f.Subcode != "" {
		b.WriteString(" " + f.Subcode)
	} else if f.Code != "" {
		b.WriteString(" " + f.Code)
	}
	if f.WSManCode != "" {
		b.WriteString(" (" + f.WSManCode + ")")
	}
	if f.Reason != "" {
		b.WriteString(": " + strings.TrimSpace(f.Reason))
	}
	return b.String()
}

func localName(qname string) string {
	if _, l, ok := strings.Cut(qname, ":"); ok {
		return l
	}
	return qname
}

// TimedOut reports a Receive that had nothing to return within the
// OperationTimeout: not an error, the client asks again.
func (f *Fault) TimedOut() bool { return localName(f.Subcode) == "TimedOut" }

// EncodingLimit reports a message the service found too large.
func (f *Fault) EncodingLimit() bool { return localName(f.Subcode) == "EncodingLimit" }

func isTimedOut(err error) bool {
	var f *Fault
	return errors.As(err, &f) && f.TimedOut()
}

func isEncodingLimit(err error) bool {
	var f *Fault
	return errors.As(err, &f) && f.EncodingLimit()
}

// parseFault returns the fault a response body carries, or nil.
// masterzen/winrm hands back the body of an HTTP 500 as if it were an
// answer, so every response is checked here.
func parseFault(body string) *Fault {
	// Stream content is base64, which holds no ':' or '<': a match is
	// markup.
	if !strings.Contains(body, ":Fault>") && !strings.Contains(body, "<Fault") {
		return nil
	}
	var env struct {
		Body struct {
			Fault *struct {
				Code struct {
					Value   string `xml:"Value"`
					Subcode struct {
						Value string `xml:"Value"`
					} `xml:"Subcode"`
				} `xml:"Code"`
				Reason struct {
					Text []string `xml:"Text"`
				} `xml:"Reason"`
				Detail struct {
					FaultDetail string `xml:"FaultDetail"`
					WSManFault  struct {
						Code    string `xml:"Code,attr"`
						Message string `xml:"Message"`
					} `xml:"WSManFault"`
				} `xml:"Detail"`
			} `xml:"Fault"`
		} `xml:"Body"`
	}
	if err := xml.Unmarshal([]byte(body), &env); err != nil || env.Body.Fault == nil {
		return nil
	}
	f := env.Body.Fault
	out := &Fault{
		Code:      strings.TrimSpace(f.Code.Value),
		Subcode:   strings.TrimSpace(f.Code.Subcode.Value),
		Detail:    strings.TrimSpace(f.Detail.FaultDetail),
		WSManCode: strings.TrimSpace(f.Detail.WSManFault.Code),
	}
	if len(f.Reason.Text) > 0 {
		out.Reason = strings.TrimSpace(f.Reason.Text[0])
	}
	if out.Reason == "" {
		out.Reason = strings.TrimSpace(f.Detail.WSManFault.Message)
	}
	return out
}

// cleanStderr makes PowerShell's CLIXML error stream readable.
func cleanStderr(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "#< CLIXML") {
		return s
	}
	var parts []string
	rest := s
	for {
		i := strings.Index(rest, `<S S="Error">`)
		if i < 0 {
			break
		}
		rest = rest[i+len(`<S S="Error">`):]
		j := strings.Index(rest, "</S>")
		if j < 0 {
			break
		}
		parts = append(parts, rest[:j])
		rest = rest[j:]
	}
	if len(parts) == 0 {
		return s
	}
	r := strings.NewReplacer("_x000D_", "", "_x000A_", "\n", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'", "&amp;", "&")
	return strings.TrimSpace(r.Replace(strings.Join(parts, "")))
}

// headBuffer keeps the first limit bytes written to it (a command's
// stderr, for error messages); the rest is dropped.
type headBuffer struct {
	limit int
	mu    sync.Mutex
	b     []byte
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.limit - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return cleanStderr(string(h.b))
}
