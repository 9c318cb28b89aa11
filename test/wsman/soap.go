package wsmantest

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Namespaces and URIs of MS-WSMV's text-based command shell.
const (
	nsSOAP       = "http://www.w3.org/2003/05/soap-envelope"
	nsAddressing = "http://schemas.xmlsoap.org/ws/2004/08/addressing"
	nsWSMan      = "http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd"
	nsShell      = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell"
	nsTransfer   = "http://schemas.xmlsoap.org/ws/2004/09/transfer"
	nsWSManFault = "http://schemas.microsoft.com/wbem/wsman/1/wsmanfault"

	resourceCmd = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/cmd"
	anonymous   = "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous"

	actionCreate   = nsTransfer + "/Create"
	actionDelete   = nsTransfer + "/Delete"
	actionCommand  = nsShell + "/Command"
	actionSend     = nsShell + "/Send"
	actionReceive  = nsShell + "/Receive"
	actionSignal   = nsShell + "/Signal"
	actionFault    = "http://schemas.dmtf.org/wbem/wsman/1/wsman/fault"
	stateDone      = nsShell + "/CommandState/Done"
	stateRunning   = nsShell + "/CommandState/Running"
	signalTerm     = nsShell + "/signal/terminate"
	signalCtrlC    = nsShell + "/signal/ctrl_c"
	signalCtrlBrk  = nsShell + "/signal/ctrl_break"
	faultDetailURI = "http://schemas.dmtf.org/wbem/wsman/1/wsman/faultDetail/"
)

// request is the part of a WS-Management request the endpoint reads.
type request struct {
	XMLName xml.Name `xml:"http://www.w3.org/2003/05/soap-envelope Envelope"`
	lifted  [][]byte // long text cut out before parsing (liftLongText)
	Header  struct {
		Action           string `xml:"http://schemas.xmlsoap.org/ws/2004/08/addressing Action"`
		MessageID        string `xml:"http://schemas.xmlsoap.org/ws/2004/08/addressing MessageID"`
		ResourceURI      string `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd ResourceURI"`
		MaxEnvelopeSize  string `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd MaxEnvelopeSize"`
		OperationTimeout string `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd OperationTimeout"`
		SelectorSet      struct {
			Selectors []struct {
				Name  string `xml:"Name,attr"`
				Value string `xml:",chardata"`
			} `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd Selector"`
		} `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd SelectorSet"`
	} `xml:"http://www.w3.org/2003/05/soap-envelope Header"`
	Body struct {
		Shell *struct {
			InputStreams  string `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell InputStreams"`
			OutputStreams string `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell OutputStreams"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Shell"`
		CommandLine *struct {
			Command   string   `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Command"`
			Arguments []string `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Arguments"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell CommandLine"`
		Send *struct {
			Streams []struct {
				Name      string `xml:"Name,attr"`
				CommandID string `xml:"CommandId,attr"`
				End       string `xml:"End,attr"`
				Data      string `xml:",chardata"`
			} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Stream"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Send"`
		Receive *struct {
			DesiredStream struct {
				CommandID string `xml:"CommandId,attr"`
				Streams   string `xml:",chardata"`
			} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell DesiredStream"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Receive"`
		Signal *struct {
			CommandID string `xml:"CommandId,attr"`
			Code      string `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Code"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Signal"`
	} `xml:"http://www.w3.org/2003/05/soap-envelope Body"`
}

func (r *request) selector(name string) string {
	for _, s := range r.Header.SelectorSet.Selectors {
		if strings.EqualFold(s.Name, name) {
			return strings.TrimSpace(s.Value)
		}
	}
	return ""
}

// fault is a SOAP 1.2 fault as WinRM sends it (HTTP 500).
type fault struct {
	code    string // s:Sender or s:Receiver
	subcode string // e.g. w:TimedOut
	reason  string
	detail  string // a wsman faultDetail URI suffix, or ""
	wsman   uint32 // the WSManFault code (a Windows error number)
}

// Faults the endpoint sends, with the texts and codes of Windows' WinRM.
func faultTimedOut() *fault {
	return &fault{"s:Receiver", "w:TimedOut",
		"The WS-Management service cannot complete the operation within the time specified in OperationTimeout.", "", 2150858793}
}

func faultEnvelopeTooLarge(size, limit int) *fault {
	return &fault{"s:Sender", "w:EncodingLimit",
		fmt.Sprintf("The WS-Management service cannot process the request because the envelope size (%d bytes) exceeds the maximum envelope size the service allows (%d bytes, MaxEnvelopeSizekb).", size, limit),
		"ServiceEnvelopeLimit", 2150858825}
}

func faultMinEnvelope(asked int) *fault {
	return &fault{"s:Sender", "w:EncodingLimit",
		fmt.Sprintf("The WS-Management service cannot process the request because the MaxEnvelopeSize (%d) is below the minimum of 8192 octets.", asked),
		"MinimumEnvelopeLimit", 2150858862}
}

func faultNoShell(id string) *fault {
	return &fault{"s:Sender", "w:InvalidSelectors",
		fmt.Sprintf("The request for the Windows Remote Shell with ShellId %s failed because the shell was not found on the server. Possible causes are: the specified ShellId is incorrect or the shell no longer exists on the server.", id),
		"", 2150858843}
}

func faultNoCommand(id string) *fault {
	return &fault{"s:Sender", "w:InvalidParameter",
		fmt.Sprintf("The request for the command with CommandId %s failed because the command was not found in the shell.", id), "", 2150858807}
}

func faultPipeClosed() *fault {
	return &fault{"s:Receiver", "w:InternalError", "The pipe is being closed.", "", 232}
}

func faultAction(action string) *fault {
	return &fault{"s:Sender", "a:ActionNotSupported",
		fmt.Sprintf("The action %q is not supported by the service.", action), "", 2150858761}
}

func faultResource(uri string) *fault {
	return &fault{"s:Sender", "w:DestinationUnreachable",
		fmt.Sprintf("The WS-Management service cannot process the request. The resource URI %q is not supported by this test endpoint.", uri), "", 2150858770}
}

func faultSchema(why string) *fault {
	return &fault{"s:Sender", "w:SchemaValidationError", "The SOAP XML in the message does not match the corresponding XML schema definition: " + why, "", 2150858817}
}

// envelope wraps a body in a SOAP envelope with WS-Addressing headers.
func envelope(action, relatesTo, body string) []byte {
	var b strings.Builder
	b.Grow(len(body) + 1024)
	b.WriteString(`<s:Envelope xml:lang="en-US" xmlns:s="` + nsSOAP + `" xmlns:a="` + nsAddressing +
		`" xmlns:x="` + nsTransfer + `" xmlns:w="` + nsWSMan + `" xmlns:rsp="` + nsShell + `"><s:Header><a:Action>`)
	b.WriteString(action)
	b.WriteString(`</a:Action><a:MessageID>uuid:`)
	b.WriteString(newUUID())
	b.WriteString(`</a:MessageID><a:To>` + anonymous + `</a:To>`)
	if relatesTo != "" {
		b.WriteString(`<a:RelatesTo>`)
		xml.EscapeText(&b, []byte(relatesTo))
		b.WriteString(`</a:RelatesTo>`)
	}
	b.WriteString(`</s:Header><s:Body>`)
	b.WriteString(body)
	b.WriteString(`</s:Body></s:Envelope>`)
	return []byte(b.String())
}

// xmlFault renders a fault envelope.
func (f *fault) xml(relatesTo string) []byte {
	var b strings.Builder
	esc := func(s string) { xml.EscapeText(&b, []byte(s)) }
	b.WriteString(`<s:Fault><s:Code><s:Value>` + f.code + `</s:Value><s:Subcode><s:Value>` + f.subcode +
		`</s:Value></s:Subcode></s:Code><s:Reason><s:Text xml:lang="en-US">`)
	esc(f.reason)
	b.WriteString(`</s:Text></s:Reason><s:Detail>`)
	if f.detail != "" {
		b.WriteString(`<w:FaultDetail>` + faultDetailURI + f.detail + `</w:FaultDetail>`)
	}
	b.WriteString(`<f:WSManFault xmlns:f="` + nsWSManFault + `" Code="` + strconv.FormatUint(uint64(f.wsman), 10) +
		`" Machine="127.0.0.1"><f:Message>`)
	esc(f.reason)
	b.WriteString(`</f:Message></f:WSManFault></s:Detail></s:Fault>`)
	return envelope(actionFault, relatesTo, b.String())
}

var durationRE = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// parseDuration reads an xs:duration such as PT60S or PT20.000S.
func parseDuration(s string) (time.Duration, bool) {
	m := durationRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil || s == "P" || s == "PT" {
		return 0, false
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
		if m[i+1] != "" {
			n, _ := strconv.Atoi(m[i+1])
			d += time.Duration(n) * unit
		}
	}
	if m[4] != "" {
		f, _ := strconv.ParseFloat(m[4], 64)
		d += time.Duration(f * float64(time.Second))
	}
	return d, true
}

// liftLongText cuts base64 text nodes longer than 1 KB out of an envelope,
// leaving "@i@" in their place, and returns them. encoding/xml reads a byte
// at a time, which made parsing half of the endpoint's work on 500 KB Send
// messages. Base64 holds no '<' or '&', so the cut is exact, and a run that
// holds anything else (markup, entities, CDATA) is left alone.
func liftLongText(body []byte) ([]byte, [][]byte) {
	const minLift = 1024
	var out []byte
	var lifted [][]byte
	last, i := 0, 0
	for {
		gt := bytes.IndexByte(body[i:], '>')
		if gt < 0 {
			break
		}
		start := i + gt + 1
		lt := bytes.IndexByte(body[start:], '<')
		if lt < 0 {
			break
		}
		end := start + lt
		if end-start > minLift && isBase64Text(body[start:end]) {
			if out == nil {
				out = make([]byte, 0, 4096)
			}
			out = append(out, body[last:start]...)
			out = fmt.Appendf(out, "@%d@", len(lifted))
			lifted = append(lifted, body[start:end])
			last = end
		}
		i = end
	}
	if lifted == nil {
		return body, nil
	}
	return append(out, body[last:]...), lifted
}

func isBase64Text(b []byte) bool {
	for _, c := range b {
		if !base64Chars[c] {
			return false
		}
	}
	return true
}

var base64Chars = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/= \t\r\n") {
		t[c] = true
	}
	return t
}()

// unlift returns the text a placeholder stands for.
func unlift(s string, lifted [][]byte) []byte {
	s = strings.TrimSpace(s)
	if len(s) > 2 && s[0] == '@' && s[len(s)-1] == '@' {
		if n, err := strconv.Atoi(s[1 : len(s)-1]); err == nil && n < len(lifted) {
			return lifted[n]
		}
	}
	return []byte(s)
}
