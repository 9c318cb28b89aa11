//go:build linux

package ssh

// Benchmarks against the REAL OpenSSH sshd. wsu's SFTP upload is compared
// with the system client's `ssh host 'cat > file'`, both including the
// connection set-up, into the same sshd as the same user; and SFTP with the
// agent stream (Host.WriteFile), the two ways a payload file can travel:
//
//	go test -run '^$' -bench 'Upload|WriteFile' -benchtime 3x ./transport/ssh

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsu-project/wsu/host"
	sshdtest "github.com/wsu-project/wsu/test/sshd"
)

const bigSize = 300 << 20

var bigOnce struct {
	once sync.Once
	path string
	err  error
}

// bigFile is 300 MB of pseudo-random bytes (incompressible, unlike zeros),
// generated once per test binary.
func bigFile(b *testing.B) string {
	b.Helper()
	bigOnce.once.Do(func() {
		bigOnce.path = filepath.Join(scratch, "big.bin")
		f, err := os.Create(bigOnce.path)
		if err != nil {
			bigOnce.err = err
			return
		}
		defer f.Close()
		chunk := make([]byte, 4<<20)
		for i := 0; i < bigSize/len(chunk); i++ {
			copy(chunk, randomBytes(len(chunk), uint64(i)))
			if _, err := f.Write(chunk); err != nil {
				bigOnce.err = err
				return
			}
		}
	})
	if bigOnce.err != nil {
		b.Fatal(bigOnce.err)
	}
	return bigOnce.path
}

// benchRig is a real sshd serving SFTP with the separate sftp-server, as
// Windows OpenSSH does, and a user to upload as. As root that is the
// password test user, whose /bin/sh starts fast: the login shell starts
// both `cat` and sftp-server, and root's rc files may take seconds.
type benchRig struct {
	srv        *sshdtest.Server
	key        sshdtest.Key
	knownHosts string
	user, dir  string
}

func newBenchRig(b *testing.B) *benchRig {
	b.Helper()
	r := &benchRig{srv: sshdtest.StartWith(b, sshdtest.Options{ExternalSFTP: true})}
	tmp := b.TempDir()
	r.key = sshdtest.NewKey(b, tmp, sshdtest.KeyOptions{})
	r.srv.Authorize(b, r.key.Public)
	r.knownHosts = filepath.Join(tmp, "known_hosts")
	r.srv.AppendKnownHosts(b, r.knownHosts)
	r.user, r.dir = r.srv.User, tmp
	if os.Geteuid() == 0 {
		r.user, _ = sshdtest.PasswordUser(b)
		r.dir = sshdtest.UserDir(b)
	}
	return r
}

func (r *benchRig) config(b *testing.B) Config {
	b.Helper()
	cfg, err := ParseConfig("bench", vars(map[string]string{
		"ansible_host":                 r.srv.Host,
		"ansible_port":                 strconv.Itoa(r.srv.Port),
		"ansible_user":                 r.user,
		"ansible_ssh_private_key_file": r.key.File,
		"ssh_known_hosts_file":         r.knownHosts,
		"connect_retry_window":         "0s",
		"wsu_remote_os":                "linux",
		"wsu_agent_path":               filepath.Join(r.dir, "wsu"),
		"wsu_agent_binary":             agentBinary(b),
		"wsu_agent_args":               "--platform sim --sim-root " + filepath.Join(r.dir, "sim"),
	}))
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// wsuUpload is wsu's upload path: connect, SFTP, temp file, rename.
func (r *benchRig) wsuUpload(b *testing.B, cfg Config, local string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := connect(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sc, err := newSFTP(c.client)
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	if _, err := uploadFile(sc, local, filepath.Join(r.dir, "wsu-upload.bin"), 0o644); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// catUpload is the system client: ssh host 'cat > file' < local.
func (r *benchRig) catUpload(b *testing.B, sshBin, local string) time.Duration {
	in, err := os.Open(local)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sshBin,
		"-i", r.key.File, "-p", strconv.Itoa(r.srv.Port),
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile="+r.knownHosts, "-o", "StrictHostKeyChecking=yes",
		r.user+"@"+r.srv.Host, "cat > "+filepath.Join(r.dir, "cat-upload.bin"))
	cmd.Stdin = in
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("ssh cat: %v\n%s", err, out)
	}
	return time.Since(start)
}

func mbps(n int, d time.Duration) float64 {
	return float64(n) * bigSize / (1 << 20) / d.Seconds()
}

func BenchmarkUpload300MB(b *testing.B) {
	r := newBenchRig(b)
	cfg, local := r.config(b), bigFile(b)
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		total += r.wsuUpload(b, cfg, local)
	}
	b.ReportMetric(mbps(b.N, total), "MB/s")
}

func BenchmarkCatUpload300MB(b *testing.B) {
	sshBin := sshdtest.EnsureClient(b)
	r := newBenchRig(b)
	local := bigFile(b)
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		total += r.catUpload(b, sshBin, local)
	}
	b.ReportMetric(mbps(b.N, total), "MB/s")
}

// BenchmarkUploadVsCat300MB alternates the two in one run (so both see the
// same machine state) and reports the ratio of their times: wsu / cat.
func BenchmarkUploadVsCat300MB(b *testing.B) {
	sshBin := sshdtest.EnsureClient(b)
	r := newBenchRig(b)
	cfg, local := r.config(b), bigFile(b)
	b.ResetTimer()
	var wsu, cat time.Duration
	for i := 0; i < b.N; i++ {
		wsu += r.wsuUpload(b, cfg, local)
		cat += r.catUpload(b, sshBin, local)
	}
	ratio := wsu.Seconds() / cat.Seconds()
	b.ReportMetric(mbps(b.N, wsu), "wsu-MB/s")
	b.ReportMetric(mbps(b.N, cat), "cat-MB/s")
	b.ReportMetric(ratio, "wsu/cat")
	b.Logf("300 MB upload: wsu %.0f MB/s, ssh cat %.0f MB/s, time ratio wsu/cat %.2f (goal <= 1.2)", mbps(b.N, wsu), mbps(b.N, cat), ratio)
}

// connectedHost connects a Host (deploying the agent), with C:\k on the
// simulated host.
func (r *benchRig) connectedHost(b *testing.B, ctx context.Context) *Host {
	b.Helper()
	h, err := Connect(ctx, r.config(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	if err := h.MkdirAll(ctx, `C:\k`, 0o755); err != nil {
		b.Fatal(err)
	}
	return h
}

// agentWrite is the agent stream's path: Host.WriteFile (fs.write) on a
// connected host. The agent's hash cache hashes a file it wrote in the
// background a little later; the wait after it keeps that work out of the
// next measurement.
func agentWrite(b *testing.B, ctx context.Context, h *Host, local, path string) time.Duration {
	f, err := os.Open(local)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	if err := h.WriteFile(ctx, path, f, 0o644); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	time.Sleep(5 * time.Second)
	return d
}

// sftpWrite is SFTP on the same connection: the path the agent names for
// path (fs.native_path), temp file, fsync, rename.
func sftpWrite(b *testing.B, ctx context.Context, h *Host, local, path string) time.Duration {
	start := time.Now()
	native, err := h.agent.client.NativePath(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	sc, err := newSFTP(h.conn.client)
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	if _, err := uploadFile(sc, local, sftpPath(h.cfg.RemoteOS, native), 0o644); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkWriteFile300MB is the agent stream: Host.WriteFile of 300 MB
// through the agent (fs.write data frames in the agent's session), on a
// connection made before the timer starts.
func BenchmarkWriteFile300MB(b *testing.B) {
	r := newBenchRig(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	h, local := r.connectedHost(b, ctx), bigFile(b)
	b.ResetTimer()
	var total time.Duration
	before := readProcCost(b)
	for i := 0; i < b.N; i++ {
		total += agentWrite(b, ctx, h, local, `C:\k\agent-write.bin`)
	}
	cost := readProcCost(b).minus(before)
	b.ReportMetric(mbps(b.N, total), "MB/s")
	b.ReportMetric(cost.cpu.Seconds()*1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(cost.writes)/float64(b.N), "write-syscalls/op")
	b.ReportMetric(cost.peers.Seconds()*1000/float64(b.N), "sshd+agent-cpu-ms/op")
}

// procCost is what this process (wsu's side: not sshd, not the agent) has
// spent so far: CPU time (user + system) and write system calls
// (/proc/self/io syscw: write, writev and the like, all threads); and the
// CPU time of the live processes below it (the test sshd, its sessions,
// the agent), which read what wsu writes. Unlike wall time it does not
// depend much on what else the machine is doing.
type procCost struct {
	cpu    time.Duration
	writes int64
	peers  time.Duration
}

func readProcCost(b *testing.B) procCost {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	c := procCost{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	io, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(io), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			c.writes, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	c.peers = descendantsCPU(b, os.Getpid())
	return c
}

// descendantsCPU sums utime + stime (/proc/PID/stat, in USER_HZ = 100 ticks
// a second) of the live processes below pid.
func descendantsCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	parent, ticks := map[int]int{}, map[int]int64{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ... field 14 utime, 15 stime; comm may hold spaces.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		parent[p], _ = strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks[p] = ut + st
	}
	var sum int64
	for p, t := range ticks {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				sum += t
				break
			}
		}
	}
	return time.Duration(sum) * 10 * time.Millisecond
}

func (c procCost) minus(o procCost) procCost {
	return procCost{cpu: c.cpu - o.cpu, writes: c.writes - o.writes, peers: c.peers - o.peers}
}

// BenchmarkUploadVsWriteFile300MB alternates the two payload paths on one
// connection (SFTP with its own session started each time, and the agent
// stream) and reports the ratio of their times: sftp / agent. Below 1 SFTP
// is faster.
func BenchmarkUploadVsWriteFile300MB(b *testing.B) {
	r := newBenchRig(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	h, local := r.connectedHost(b, ctx), bigFile(b)
	b.ResetTimer()
	var viaSFTP, viaAgent time.Duration
	for i := 0; i < b.N; i++ {
		// Alternate which goes first, so neither always follows the
		// other's leftovers (page cache, the server's dirty pages).
		if i%2 == 0 {
			viaSFTP += sftpWrite(b, ctx, h, local, `C:\k\sftp-write.bin`)
			viaAgent += agentWrite(b, ctx, h, local, `C:\k\agent-write.bin`)
		} else {
			viaAgent += agentWrite(b, ctx, h, local, `C:\k\agent-write.bin`)
			viaSFTP += sftpWrite(b, ctx, h, local, `C:\k\sftp-write.bin`)
		}
	}
	ratio := viaSFTP.Seconds() / viaAgent.Seconds()
	b.ReportMetric(mbps(b.N, viaSFTP), "sftp-MB/s")
	b.ReportMetric(mbps(b.N, viaAgent), "agent-MB/s")
	b.ReportMetric(ratio, "sftp/agent")
	b.Logf("300 MB payload: SFTP %.0f MB/s, agent stream %.0f MB/s, time ratio sftp/agent %.2f", mbps(b.N, viaSFTP), mbps(b.N, viaAgent), ratio)
}

// BenchmarkAgentRoundTripSSH is fs.stat round trips through the agent
// over one SSH connection.
func BenchmarkAgentRoundTripSSH(b *testing.B) {
	r := newBenchRig(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h, err := Connect(ctx, r.config(b))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	var hh host.Host = h
	if _, err := hh.Stat(ctx, `C:\`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := hh.Stat(ctx, `C:\k`); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rtt/s")
}

// BenchmarkUploadTuning measures wsu's upload with several SFTP packet
// sizes and request concurrencies, interleaved in every iteration so that
// load from elsewhere on the machine hits them all alike; it chose
// sftpMaxPacket and sftpConcurrency. "32KiB/64" is pkg/sftp's default.
func BenchmarkUploadTuning(b *testing.B) {
	type setting struct{ packet, conc int }
	settings := []setting{{32 << 10, 64}, {64 << 10, 8}, {255 << 10, 1}, {255 << 10, 2}, {255 << 10, 4}, {255 << 10, 8}}
	defer func(p, c int) { sftpMaxPacket, sftpConcurrency = p, c }(sftpMaxPacket, sftpConcurrency)
	r := newBenchRig(b)
	cfg, local := r.config(b), bigFile(b)
	total := make([]time.Duration, len(settings))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, s := range settings {
			sftpMaxPacket, sftpConcurrency = s.packet, s.conc
			total[j] += r.wsuUpload(b, cfg, local)
		}
	}
	for j, s := range settings {
		b.ReportMetric(mbps(b.N, total[j]), strconv.Itoa(s.packet>>10)+"KiB/"+strconv.Itoa(s.conc)+"-MB/s")
	}
}

// BenchmarkConnectionFootprint is the heap each connected host keeps once
// it has written a file through its agent (the buffers a connection
// holds between tasks): ten connections to the real sshd, a 1 MB file
// written on each, then a full GC. heap-KiB/host is what 100 hosts of a
// fleet multiply.
func BenchmarkConnectionFootprint(b *testing.B) {
	const hosts = 10
	r := newBenchRig(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	local := filepath.Join(b.TempDir(), "1mb.bin")
	if err := os.WriteFile(local, randomBytes(1<<20, 1), 0o644); err != nil {
		b.Fatal(err)
	}
	var perHost float64
	for i := 0; i < b.N; i++ {
		before := liveHeap()
		var hs []*Host
		for j := range hosts {
			h := r.connectedHost(b, ctx)
			f, err := os.Open(local)
			if err != nil {
				b.Fatal(err)
			}
			err = h.WriteFile(ctx, `C:\k\footprint-`+strconv.Itoa(j)+".bin", f, 0o644)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			hs = append(hs, h)
		}
		perHost += float64(liveHeap()-before) / hosts
		for _, h := range hs {
			h.Close()
		}
	}
	b.ReportMetric(perHost/float64(b.N)/1024, "heap-KiB/host")
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
