package proto

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The start-up is text, so that a transport which mangles bytes (CRLF
// translation, 7-bit or charset conversion) is detected before any frame:
//
//	agent:  WSU-AGENT/<protocol> <version> <sha256>\n <probe> \nEND-PROBE\n
//	client: WSU-CLIENT/<protocol> probe=ok|bad\n <probe> \nEND-PROBE\n
//	agent:  MODE binary|base64\n
//
// The probe is the 256 byte values in order.
const (
	agentMagic  = "WSU-AGENT/"
	clientMagic = "WSU-CLIENT/"
	endProbe    = "END-PROBE"
	modePrefix  = "MODE "

	maxStartLine = 1024
	// maxProbe bounds the mangled probe: even a transport that expands
	// every byte does not come close.
	maxProbe = 4096
	// maxNoise bounds what the client skips before the greeting (a login
	// banner, a shell's complaint) and quotes when there is no greeting.
	maxNoise = 16 << 10
)

// probeBlock is the probe as sent, terminator included.
var probeBlock = func() []byte {
	b := make([]byte, 0, 256+len(endProbe)+2)
	for i := range 256 {
		b = append(b, byte(i))
	}
	b = append(b, '\n')
	b = append(b, endProbe...)
	return append(b, '\n')
}()

// Greeting is the agent's first line.
type Greeting struct {
	Protocol int
	Version  string
	SHA256   string
}

// MismatchError is an agent speaking another protocol version. The
// controller redeploys such an agent.
type MismatchError struct {
	AgentProtocol int
	AgentVersion  string
	AgentSHA256   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("agent protocol mismatch: the agent (wsu %s, sha256 %s) speaks protocol %d, this wsu speaks %d; redeploy the agent",
		e.AgentVersion, e.AgentSHA256, e.AgentProtocol, Protocol)
}

// AgentStart runs the agent's side of the start-up and returns the mode for
// the frames. io.EOF means the client left before saying anything (it may
// only have wanted the greeting).
func AgentStart(r *bufio.Reader, w io.Writer, version, sha256 string) (Mode, error) {
	greeting := fmt.Sprintf("%s%d %s %s\n", agentMagic, Protocol, field(version), field(sha256))
	if _, err := w.Write(append([]byte(greeting), probeBlock...)); err != nil {
		return 0, err
	}
	line, err := readLine(r, nil, maxStartLine)
	if err != nil {
		if err == io.EOF {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("reading the client's line: %w", err)
	}
	text := string(trimEOL(line))
	rest, ok := strings.CutPrefix(text, clientMagic)
	if !ok {
		return 0, protoErr("expected the client's %q line, got %q", clientMagic, text)
	}
	ver, probe, _ := strings.Cut(rest, " ")
	if n, err := strconv.Atoi(ver); err != nil || n != Protocol {
		return 0, protoErr("client speaks protocol %q, this agent speaks %d", ver, Protocol)
	}
	var clientSaw bool
	switch probe {
	case "probe=ok":
		clientSaw = true
	case "probe=bad":
	default:
		return 0, protoErr("malformed client line %q", text)
	}
	clean, err := readProbe(r)
	if err != nil {
		return 0, fmt.Errorf("reading the client's probe: %w", err)
	}
	mode := ModeBase64
	if clientSaw && clean {
		mode = ModeBinary
	}
	if _, err := io.WriteString(w, modePrefix+mode.String()+"\n"); err != nil {
		return 0, err
	}
	return mode, nil
}

// ClientStart runs the client's side of the start-up. An agent speaking
// another protocol is a *MismatchError, returned before anything is sent.
func ClientStart(r *bufio.Reader, w io.Writer) (Greeting, Mode, error) {
	g, err := readGreeting(r)
	if err != nil {
		return g, 0, err
	}
	if g.Protocol != Protocol {
		return g, 0, &MismatchError{AgentProtocol: g.Protocol, AgentVersion: g.Version, AgentSHA256: g.SHA256}
	}
	clean, err := readProbe(r)
	if err != nil {
		return g, 0, fmt.Errorf("reading the agent's probe: %w", err)
	}
	verdict := "bad"
	if clean {
		verdict = "ok"
	}
	msg := fmt.Sprintf("%s%d probe=%s\n", clientMagic, Protocol, verdict)
	if _, err := w.Write(append([]byte(msg), probeBlock...)); err != nil {
		return g, 0, err
	}
	line, err := readLine(r, nil, maxStartLine)
	if err != nil {
		return g, 0, fmt.Errorf("reading the agent's MODE line: %w", unexpected(err))
	}
	switch text := string(trimEOL(line)); text {
	case modePrefix + ModeBinary.String():
		return g, ModeBinary, nil
	case modePrefix + ModeBase64.String():
		return g, ModeBase64, nil
	default:
		return g, 0, protoErr("expected a MODE line, got %q", text)
	}
}

// readGreeting skips lines of noise up to the greeting, which may itself
// follow noise on its line (a prompt). Without one, the error quotes the
// noise: it usually says why the agent did not start.
func readGreeting(r *bufio.Reader) (Greeting, error) {
	var noise []byte
	for {
		line, err := readLine(r, nil, maxNoise-len(noise))
		if i := bytes.Index(line, []byte(agentMagic)); i >= 0 && err == nil {
			return parseGreeting(string(trimEOL(line[i:])))
		}
		noise = append(noise, line...)
		switch {
		case errors.Is(err, errLineTooLong):
			return Greeting{}, fmt.Errorf("%w: no agent greeting in the first %d bytes: %q", ErrProtocol, maxNoise, noise)
		case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
			if len(noise) == 0 {
				return Greeting{}, errors.New("the agent closed the connection without a greeting")
			}
			return Greeting{}, fmt.Errorf("the agent closed the connection without a greeting; it wrote: %q", noise)
		case err != nil:
			return Greeting{}, err
		}
	}
}

func parseGreeting(text string) (Greeting, error) {
	f := strings.Fields(strings.TrimPrefix(text, agentMagic))
	if len(f) != 3 {
		return Greeting{}, protoErr("malformed agent greeting %q", text)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 {
		return Greeting{}, protoErr("malformed agent greeting %q", text)
	}
	return Greeting{Protocol: n, Version: f[1], SHA256: f[2]}, nil
}

// readProbe reads up to the END-PROBE line and reports whether the bytes
// arrived exactly as sent. A mangled probe is not an error: it selects
// base64 mode.
func readProbe(r *bufio.Reader) (clean bool, err error) {
	var got []byte
	for {
		start := len(got)
		got, err = readLine(r, got, maxProbe)
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				return false, fmt.Errorf("%w: no %s line within %d bytes", ErrProtocol, endProbe, maxProbe)
			}
			return false, unexpected(err)
		}
		if string(trimEOL(got[start:])) == endProbe {
			return bytes.Equal(got, probeBlock), nil
		}
	}
}

// field keeps a greeting field one word long.
func field(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}
