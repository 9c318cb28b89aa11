package wsmantest

// The server side of NTLMv2 authentication (MS-NLMP), as WinRM runs it
// inside HTTP "Negotiate": the client sends a NEGOTIATE_MESSAGE, the server
// answers 401 with a CHALLENGE_MESSAGE, the client proves it knows the
// password with an AUTHENTICATE_MESSAGE on the same TCP connection, which is
// authenticated from then on. Only authentication: no signing, sealing or
// key exchange (WinRM over HTTPS needs none).

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"
	"unicode/utf16"
)

var ntlmSignature = []byte("NTLMSSP\x00")

// NEGOTIATE flags (MS-NLMP 2.2.2.5) the challenge offers. Not KEY_EXCH or
// LM_KEY: NTLMv2 only, and no session key is used.
const (
	flagUnicode          = 0x00000001
	flagRequestTarget    = 0x00000004
	flagNTLM             = 0x00000200
	flagAlwaysSign       = 0x00008000
	flagTargetTypeDomain = 0x00010000
	flagExtendedSession  = 0x00080000
	flagTargetInfo       = 0x00800000
	flagVersion          = 0x02000000
	flag128              = 0x20000000
	flag56               = 0x80000000

	challengeFlags = flagUnicode | flagRequestTarget | flagNTLM | flagAlwaysSign | flagTargetTypeDomain |
		flagExtendedSession | flagTargetInfo | flagVersion | flag128 | flag56
)

// AV_PAIR ids (MS-NLMP 2.2.2.1).
const (
	avEOL             = 0
	avNbComputerName  = 1
	avNbDomainName    = 2
	avDNSComputerName = 3
	avDNSDomainName   = 4
	avTimestamp       = 7
)

// ntlmServer holds the account the endpoint accepts.
type ntlmServer struct {
	user     string // without a domain
	password string
	domain   string // NetBIOS domain name announced in the challenge
	computer string
}

// messageType checks the signature and returns the NTLM message type.
func messageType(msg []byte) (uint32, error) {
	if len(msg) < 12 || !bytes.Equal(msg[:8], ntlmSignature) {
		return 0, errors.New("not an NTLMSSP message")
	}
	return binary.LittleEndian.Uint32(msg[8:12]), nil
}

// challenge builds a CHALLENGE_MESSAGE (MS-NLMP 2.2.1.2) and returns it with
// the server challenge it carries.
func (s *ntlmServer) challenge(negotiate []byte) (msg, serverChallenge []byte, err error) {
	if t, err := messageType(negotiate); err != nil || t != 1 {
		return nil, nil, fmt.Errorf("expected an NTLM NEGOTIATE_MESSAGE (type 1)")
	}
	if len(negotiate) < 16 || binary.LittleEndian.Uint32(negotiate[12:16])&flagUnicode == 0 {
		return nil, nil, errors.New("the client does not offer Unicode (NTLMSSP_NEGOTIATE_UNICODE)")
	}
	serverChallenge = make([]byte, 8)
	if _, err := rand.Read(serverChallenge); err != nil {
		return nil, nil, err
	}
	target := utf16le(s.domain)
	var info bytes.Buffer
	av := func(id uint16, v []byte) {
		binary.Write(&info, binary.LittleEndian, id)
		binary.Write(&info, binary.LittleEndian, uint16(len(v)))
		info.Write(v)
	}
	av(avNbDomainName, utf16le(s.domain))
	av(avNbComputerName, utf16le(s.computer))
	av(avDNSDomainName, utf16le(strings.ToLower(s.domain)+".test"))
	av(avDNSComputerName, utf16le(strings.ToLower(s.computer)+"."+strings.ToLower(s.domain)+".test"))
	var ts [8]byte
	binary.LittleEndian.PutUint64(ts[:], fileTime(time.Now()))
	av(avTimestamp, ts[:])
	av(avEOL, nil)

	const header = 56
	var b bytes.Buffer
	b.Write(ntlmSignature)
	binary.Write(&b, binary.LittleEndian, uint32(2))
	field(&b, len(target), header)
	binary.Write(&b, binary.LittleEndian, uint32(challengeFlags))
	b.Write(serverChallenge)
	b.Write(make([]byte, 8)) // reserved
	field(&b, info.Len(), header+len(target))
	b.Write([]byte{10, 0, 0x7c, 0x4f, 0, 0, 0, 15}) // version: 10.0.20348, NTLMSSP_REVISION_W2K3
	b.Write(target)
	b.Write(info.Bytes())
	return b.Bytes(), serverChallenge, nil
}

// field writes a len/maxlen/offset triple.
func field(b *bytes.Buffer, n, offset int) {
	binary.Write(b, binary.LittleEndian, uint16(n))
	binary.Write(b, binary.LittleEndian, uint16(n))
	binary.Write(b, binary.LittleEndian, uint32(offset))
}

// authenticate verifies an AUTHENTICATE_MESSAGE (MS-NLMP 2.2.1.3) against
// the server challenge: the NTLMv2 response must be
// HMAC_MD5(NTOWFv2, ServerChallenge || blob) followed by the blob
// (MS-NLMP 3.3.2). It returns the user name on success.
func (s *ntlmServer) authenticate(msg, serverChallenge []byte) (string, error) {
	if t, err := messageType(msg); err != nil || t != 3 {
		return "", errors.New("expected an NTLM AUTHENTICATE_MESSAGE (type 3)")
	}
	if len(msg) < 64 {
		return "", errors.New("AUTHENTICATE_MESSAGE too short")
	}
	get := func(at int) ([]byte, error) {
		n := int(binary.LittleEndian.Uint16(msg[at:]))
		off := int(binary.LittleEndian.Uint32(msg[at+4:]))
		if off < 0 || off+n > len(msg) {
			return nil, errors.New("AUTHENTICATE_MESSAGE field out of range")
		}
		return msg[off : off+n], nil
	}
	nt, err := get(20)
	if err != nil {
		return "", err
	}
	domainB, err := get(28)
	if err != nil {
		return "", err
	}
	userB, err := get(36)
	if err != nil {
		return "", err
	}
	user, domain := fromUTF16le(userB), fromUTF16le(domainB)
	if user == "" {
		return "", errors.New("anonymous authentication is not allowed")
	}
	if len(nt) <= 24 {
		return "", errors.New("NTLMv1 responses are refused; NTLMv2 is required")
	}
	if len(nt) < 16+28 || nt[16] != 1 || nt[17] != 1 {
		return "", errors.New("malformed NTLMv2 response")
	}
	if !strings.EqualFold(user, s.user) {
		return "", fmt.Errorf("unknown user %q", user)
	}
	key := ntowfv2(s.password, user, domain)
	proof := hmacMD5(key, serverChallenge, nt[16:])
	if !hmac.Equal(proof, nt[:16]) {
		return "", fmt.Errorf("wrong password for %q", user)
	}
	return user, nil
}

// ntowfv2 is NTOWFv2 (MS-NLMP 3.3.2):
// HMAC_MD5(MD4(UNICODE(password)), UNICODE(Uppercase(user) || domain)).
func ntowfv2(password, user, domain string) []byte {
	h := md4(utf16le(password))
	return hmacMD5(h[:], utf16le(strings.ToUpper(user)+domain))
}

func hmacMD5(key []byte, data ...[]byte) []byte {
	m := hmac.New(md5.New, key)
	for _, d := range data {
		m.Write(d)
	}
	return m.Sum(nil)
}

func utf16le(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

func fromUTF16le(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// fileTime is a Windows FILETIME: 100 ns ticks since 1601-01-01.
func fileTime(t time.Time) uint64 {
	return uint64(t.UnixNano()/100) + 116444736000000000
}

// md4 is RFC 1320 MD4, which NTLM needs for the NT hash. Written here
// rather than imported: golang.org/x/crypto/md4 is deprecated, and this is
// test code that must only agree with Windows.
func md4(msg []byte) [16]byte {
	a, b, c, d := uint32(0x67452301), uint32(0xefcdab89), uint32(0x98badcfe), uint32(0x10325476)
	n := len(msg)
	buf := append(append([]byte(nil), msg...), 0x80)
	for len(buf)%64 != 56 {
		buf = append(buf, 0)
	}
	buf = binary.LittleEndian.AppendUint64(buf, uint64(n)*8)

	f := func(x, y, z uint32) uint32 { return x&y | ^x&z }
	g := func(x, y, z uint32) uint32 { return x&y | x&z | y&z }
	h := func(x, y, z uint32) uint32 { return x ^ y ^ z }
	var x [16]uint32
	for len(buf) > 0 {
		for i := range x {
			x[i] = binary.LittleEndian.Uint32(buf[4*i:])
		}
		buf = buf[64:]
		aa, bb, cc, dd := a, b, c, d
		for i := 0; i < 16; i += 4 {
			a = bits.RotateLeft32(a+f(b, c, d)+x[i], 3)
			d = bits.RotateLeft32(d+f(a, b, c)+x[i+1], 7)
			c = bits.RotateLeft32(c+f(d, a, b)+x[i+2], 11)
			b = bits.RotateLeft32(b+f(c, d, a)+x[i+3], 19)
		}
		for i := 0; i < 4; i++ {
			const k = 0x5a827999
			a = bits.RotateLeft32(a+g(b, c, d)+x[i]+k, 3)
			d = bits.RotateLeft32(d+g(a, b, c)+x[i+4]+k, 5)
			c = bits.RotateLeft32(c+g(d, a, b)+x[i+8]+k, 9)
			b = bits.RotateLeft32(b+g(c, d, a)+x[i+12]+k, 13)
		}
		for _, i := range [4]int{0, 2, 1, 3} {
			const k = 0x6ed9eba1
			a = bits.RotateLeft32(a+h(b, c, d)+x[i]+k, 3)
			d = bits.RotateLeft32(d+h(a, b, c)+x[i+8]+k, 9)
			c = bits.RotateLeft32(c+h(d, a, b)+x[i+4]+k, 11)
			b = bits.RotateLeft32(b+h(c, d, a)+x[i+12]+k, 15)
		}
		a, b, c, d = a+aa, b+bb, c+cc, d+dd
	}
	var out [16]byte
	binary.LittleEndian.PutUint32(out[0:], a)
	binary.LittleEndian.PutUint32(out[4:], b)
	binary.LittleEndian.PutUint32(out[8:], c)
	binary.LittleEndian.PutUint32(out[12:], d)
	return out
}
