package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent"
	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/transport/local"
)

// rawClient speaks the protocol by hand, to send what a real client never
// would.
type rawClient struct {
	w      *io.PipeWriter
	dec    *proto.Decoder
	served chan error
}

func startRaw(t *testing.T) *rawClient {
	t.Helper()
	skipUnlessLinux(t)
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	rc := &rawClient{w: clientOut, served: make(chan error, 1)}
	go func() {
		err := agent.Serve(context.Background(), agentIn, agentOut, local.New(), agent.ServerInfo{Version: "t"})
		agentIn.CloseWithError(io.ErrClosedPipe)
		agentOut.Close()
		rc.served <- err
	}()
	t.Cleanup(func() { clientOut.Close(); clientIn.Close() })
	br := bufio.NewReader(clientIn)
	_, mode, err := proto.ClientStart(br, clientOut)
	require.NoError(t, err)
	rc.dec = proto.NewDecoder(br, mode)
	f, err := rc.dec.Decode()
	require.NoError(t, err)
	require.Equal(t, proto.KindHello, f.Kind)
	return rc
}

func frame(kind proto.Kind, id uint64, payload string) []byte {
	return proto.AppendFrame(nil, proto.Frame{Kind: kind, ID: id, Payload: []byte(payload)})
}

func request(id uint64, op, args string) []byte {
	return frame(proto.KindRequest, id, `{"op":"`+op+`","args":`+args+`}`)
}

// TestMalformed sends broken input after a good start-up. The agent must
// answer an unusable request with an error response and carry on, end the
// connection on a broken frame (saying why, under id 0), and never panic or
// hang.
func TestMalformed(t *testing.T) {
	const ok = proto.Code("") // a successful response
	tests := []struct {
		name  string
		send  [][]byte
		want  map[uint64]proto.Code // responses by request id
		fatal bool                  // the agent reports a protocol error and stops
		cut   bool                  // the input ends right after send
	}{
		{name: "not json", send: [][]byte{frame(proto.KindRequest, 1, "{")}, want: map[uint64]proto.Code{1: proto.CodeInvalid}},
		{name: "json but not an object", send: [][]byte{frame(proto.KindRequest, 1, `[1,2]`)}, want: map[uint64]proto.Code{1: proto.CodeInvalid}},
		{name: "unknown op", send: [][]byte{request(1, "fs.format", `{}`)}, want: map[uint64]proto.Code{1: proto.CodeInvalid}},
		{name: "empty op", send: [][]byte{frame(proto.KindRequest, 1, `{}`)}, want: map[uint64]proto.Code{1: proto.CodeInvalid}},
		{name: "wrong argument type", send: [][]byte{request(1, "fs.stat", `{"path":5}`)}, want: map[uint64]proto.Code{1: proto.CodeInvalid}},
		{name: "unknown argument", send: [][]byte{request(1, "fs.stat", `{"pth":"/"}`)}, want: map[uint64]proto.Code{1: proto.CodeInvalid}},
		{name: "arguments not an object", send: [][]byte{request(1, "fs.stat", `"/"`)}, want: map[uint64]proto.Code{1: proto.CodeInvalid}},
		{name: "http request the checks refuse", send: [][]byte{request(1, "net.http", `{"url":"file:///etc/passwd"}`),
			request(2, "net.http", `{"url":"http://127.0.0.1:1/","method":"DELETE"}`), request(3, "net.http", `{"url":"http://127.0.0.1:1/","limit":1048577}`)},
			want: map[uint64]proto.Code{1: proto.CodeInvalid, 2: proto.CodeInvalid, 3: proto.CodeInvalid}},
		{name: "write without stream", send: [][]byte{request(1, "fs.write", `{"path":"/tmp/x","mode":384}`)}, want: map[uint64]proto.Code{1: proto.CodeInvalid}},
		{name: "no arguments", send: [][]byte{request(1, "proc.run", `null`)}, want: map[uint64]proto.Code{1: proto.CodeInternal}},
		{name: "stream frames for unknown ids", send: [][]byte{
			frame(proto.KindData, 7, "junk"), frame(proto.KindDataEnd, 7, "oops"), frame(proto.KindCancel, 8, ""),
			request(1, "fs.stat", `{"path":"/"}`),
		}, want: map[uint64]proto.Code{1: ok}},
		{name: "stream on an op without one", send: [][]byte{
			frame(proto.KindRequest, 1, `{"op":"fs.stat","args":{"path":"/"},"stream":true}`),
			frame(proto.KindData, 1, "ignored"), frame(proto.KindDataEnd, 1, ""),
		}, want: map[uint64]proto.Code{1: ok}},
		{name: "stream aborted by the client", send: [][]byte{
			frame(proto.KindRequest, 1, `{"op":"fs.write","args":{"path":"/nonexistent-dir/x","mode":384},"stream":true}`),
			frame(proto.KindDataEnd, 1, "source failed"),
		}, want: map[uint64]proto.Code{1: proto.CodeNotFound}},
		{name: "request id 0", send: [][]byte{request(0, "fs.stat", `{"path":"/"}`)}, fatal: true},
		{name: "oversized frame", send: [][]byte{{0x7f, 0xff, 0xff, 0xff, 4}}, fatal: true},
		{name: "short frame", send: [][]byte{{0, 0, 0, 3, 2, 0, 0}}, fatal: true},
		{name: "unknown kind", send: [][]byte{frame(proto.KindCancel, 1, "")[:4], {99, 0, 0, 0, 0, 0, 0, 0, 1}}, fatal: true},
		{name: "hello from the client", send: [][]byte{frame(proto.KindHello, 0, "{}")}, fatal: true},
		{name: "response from the client", send: [][]byte{frame(proto.KindResponse, 3, "{}")}, fatal: true},
		{name: "duplicate request id", send: [][]byte{
			request(5, "proc.run", `{"argv":["sleep","30"]}`), request(5, "fs.stat", `{"path":"/"}`),
		}, want: map[uint64]proto.Code{5: proto.CodeCancelled}, fatal: true},
		{name: "cut frame", send: [][]byte{request(1, "fs.stat", `{"path":"/"}`)[:10]}, cut: true},
		{name: "garbage", send: [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}, fatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := startRaw(t)
			want := map[uint64]proto.Code{}
			for id, code := range tt.want {
				want[id] = code
			}
			probe := !tt.fatal && !tt.cut
			if probe {
				want[99] = ok
			}
			go func() {
				// A separate writer: the agent answers while we send.
				for _, b := range tt.send {
					if _, err := rc.w.Write(b); err != nil {
						return
					}
				}
				if probe {
					rc.w.Write(request(99, "fs.stat", `{"path":"/"}`)) // still serving?
				}
				if tt.cut {
					rc.w.Close()
				}
			}()

			got := map[uint64]proto.Code{}
			var connErr string
			timeout := time.AfterFunc(10*time.Second, func() { rc.w.CloseWithError(errors.New("test timed out")) })
			defer timeout.Stop()
			for {
				f, err := rc.dec.Decode()
				if err != nil {
					assert.ErrorIs(t, err, io.EOF, "the agent ends the connection cleanly")
					break
				}
				require.Equal(t, proto.KindResponse, f.Kind)
				var resp proto.Response
				require.NoError(t, json.Unmarshal(f.Payload, &resp))
				code := ok
				if resp.Error != nil {
					code = resp.Error.Code
				}
				if f.ID == 0 {
					connErr = resp.Error.Message
					continue
				}
				got[f.ID] = code
				if !tt.fatal && len(got) == len(want) {
					rc.w.Close() // all answered: leave
				}
			}

			var served error
			select {
			case served = <-rc.served:
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return")
			}
			if tt.fatal {
				assert.ErrorIs(t, served, proto.ErrProtocol)
				assert.Contains(t, connErr, "protocol error")
			} else {
				assert.NoError(t, served)
				assert.Empty(t, connErr)
			}
			assert.Equal(t, want, got)
		})
	}
}

// A client that leaves during start-up is a clean shutdown; one that says
// something else is an error.
func TestStartupEnds(t *testing.T) {
	skipUnlessLinux(t)
	tests := []struct {
		name    string
		client  string
		wantErr bool
	}{
		{"leaves after the greeting", "", false},
		{"not a wsu client", "SSH-2.0-OpenSSH_9.2\r\n", true},
		{"other protocol", fmt.Sprintf("WSU-CLIENT/%d probe=ok\n", proto.Protocol+1), true},
		{"cut probe", fmt.Sprintf("WSU-CLIENT/%d probe=ok\n\x00\x01\x02", proto.Protocol), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agentIn, clientOut := io.Pipe()
			clientIn, agentOut := io.Pipe()
			served := make(chan error, 1)
			go func() {
				served <- agent.Serve(context.Background(), agentIn, agentOut, local.New(), agent.ServerInfo{})
				agentOut.Close()
			}()
			go io.Copy(io.Discard, clientIn)
			io.WriteString(clientOut, tt.client)
			clientOut.Close()
			select {
			case err := <-served:
				if tt.wantErr {
					assert.Error(t, err)
				} else {
					assert.NoError(t, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return")
			}
		})
	}
}

type panicHost struct{ host.Host }

func (panicHost) Stat(context.Context, string) (host.FileInfo, error) { panic("nil map") }

// A backend panic is that request's error; the agent keeps serving.
func TestBackendPanic(t *testing.T) {
	c := start(t, panicHost{local.New()})
	_, err := c.Stat(testCtx(t), "/")
	require.Error(t, err)
	assert.Equal(t, "agent: fs.stat panicked: nil map", err.Error())
	_, err = c.SHA256(testCtx(t), "/etc/hostname")
	assert.NoError(t, err)
}
