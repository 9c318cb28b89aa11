package ssh

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// How the agent binary reached the host (Host.AgentDeployMethod).
const (
	deployNone = ""     // the agent in place was current
	deploySFTP = "sftp" // written over SFTP
	deployExec = "exec" // piped into an exec session's stdin (no SFTP)
)

// execUploadCommand is the command that, given the agent binary on its
// stdin, puts it at target without SFTP: it writes a temp file beside the
// target, checks that all size bytes arrived (a cut connection ends the
// stream early, which must not install half a binary), flushes it and
// renames it over the target, so the target is the old binary or the
// complete new one. On Windows stdin carries base64 (see
// windowsUploadScript); elsewhere the raw bytes.
//
// The target path is validated (validateAgentPath) to letters, digits and
// _ . : / \ + ~ -, so it needs no quoting, as in the start command.
func execUploadCommand(remoteOS, target string, size int64) string {
	if remoteOS == "windows" {
		return powershellEncoded(windowsUploadScript(target, size))
	}
	dir, base := path.Split(target)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	tmp := path.Join(dir, "."+base+".wsu-upload-"+randomHex(6))
	n := strconv.FormatInt(size, 10)
	// SIGPIPE and SIGHUP are ignored so that a cut connection (sshd closes
	// the pipes) runs the script to its end: cat sees end of input, the
	// count fails and the temp file is removed. umask after mkdir: the
	// directory gets the usual mode, the temp file is private until it is
	// complete.
	return "trap '' PIPE HUP; mkdir -p " + dir + " && umask 077 && cat > " + tmp +
		" && n=$(wc -c < " + tmp + ") && if [ $n -ne " + n + " ]; then echo \"wsu: got $n of " + n + " bytes: the upload was cut\" >&2; false; fi" +
		" && chmod 0755 " + tmp + " && { sync " + tmp + " 2>/dev/null; mv -f " + tmp + " " + target + "; }" +
		" || { rm -f " + tmp + "; exit 1; }"
}

// windowsUploadScript is the PowerShell that writes stdin (base64, line
// breaks allowed) to target through a temp file beside it. It is passed
// as -EncodedCommand (powershellEncoded), so nothing in it is seen by the
// default shell, cmd or PowerShell. base64 because a console-mode stdin
// could act on a raw Ctrl-Z or Ctrl-C byte, and whatever sits between
// sshd and PowerShell may translate line ends.
func windowsUploadScript(target string, size int64) string {
	n := strconv.FormatInt(size, 10)
	return "$ErrorActionPreference='Stop';" +
		"$p='" + target + "';$d=[IO.Path]::GetDirectoryName($p);" +
		"$t=[IO.Path]::Combine($d,'.'+[IO.Path]::GetFileName($p)+'.wsu-upload-'+$PID);" +
		"[void][IO.Directory]::CreateDirectory($d);" +
		"$i=New-Object Security.Cryptography.CryptoStream([Console]::OpenStandardInput(),(New-Object Security.Cryptography.FromBase64Transform),'Read');" +
		"$o=[IO.File]::Create($t);" +
		"try{$i.CopyTo($o,1MB);$o.Flush($true);" +
		"if($o.Length -ne " + n + "){throw ('got '+$o.Length+' of " + n + " bytes: the upload was cut')};" +
		"$o.Close();Move-Item -Force -LiteralPath $t -Destination $p}" +
		"catch{$o.Close();Remove-Item -Force -LiteralPath $t -ErrorAction SilentlyContinue;throw}"
}

// powershellEncoded runs script with -EncodedCommand: base64 of its
// UTF-16LE, whose alphabet (letters, digits, + / =) cmd and PowerShell
// both pass through unchanged, so the line works whichever is the OpenSSH
// default shell.
func powershellEncoded(script string) string {
	u := utf16.Encode([]rune(script))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return "powershell.exe -NoProfile -NonInteractive -EncodedCommand " + base64.StdEncoding.EncodeToString(b)
}

// execUploadAgent puts cfg.Agent at cfg.AgentPath through one exec
// session (execUploadCommand), for hosts whose sshd has no sftp subsystem.
// It returns the bytes of the binary sent, also when it fails.
func execUploadAgent(ctx context.Context, c *conn, cfg Config) (int64, error) {
	src, size, err := cfg.Agent.Open()
	if err != nil {
		return 0, err
	}
	defer src.Close()
	return execUpload(ctx, c, cfg.RemoteOS, src, size, cfg.AgentPath)
}

// execUpload sends size bytes of src to target through execUploadCommand.
func execUpload(ctx context.Context, c *conn, remoteOS string, src io.Reader, size int64, target string) (int64, error) {
	sess, err := c.client.NewSession()
	if err != nil {
		return 0, fmt.Errorf("opening an SSH session: %w", err)
	}
	defer sess.Close()
	stdin, err := sess.StdinPipe()
	if err != nil {
		return 0, err
	}
	stderr := &tailBuffer{max: 4 << 10}
	sess.Stdout, sess.Stderr = stderr, stderr
	cmd := execUploadCommand(remoteOS, target, size)
	if err := sess.Start(cmd); err != nil {
		return 0, fmt.Errorf("starting the upload command: %w", err)
	}
	// Closing the session is how a context interrupts it.
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()

	counted := &countingReader{r: io.LimitReader(src, size)}
	var werr error
	if remoteOS == "windows" {
		werr = writeBase64Lines(stdin, counted)
	} else {
		_, werr = io.Copy(stdin, counted)
	}
	if werr == nil && counted.n < size {
		werr = fmt.Errorf("the local file ended after %d of %d bytes", counted.n, size)
	}
	if werr != nil {
		// Without a clean end of input the command sees fewer bytes than
		// it expects and leaves the target alone.
		sess.Close()
		if ctx.Err() != nil {
			return counted.n, fmt.Errorf("upload interrupted: %w", ctx.Err())
		}
		return counted.n, fmt.Errorf("sending the agent binary: %w", werr)
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return counted.n, fmt.Errorf("upload interrupted: %w", ctx.Err())
	case <-time.After(2 * time.Minute):
		// Renaming takes no time; a command still running is stuck.
		err = errors.New("the upload command did not finish within 2m after its input ended")
	}
	if err != nil {
		msg := err.Error()
		if s := strings.TrimSpace(stderr.String()); s != "" {
			msg += "; it wrote: " + s
		}
		return counted.n, fmt.Errorf("the upload command failed: %s", msg)
	}
	return counted.n, nil
}

// writeBase64Lines writes r to w as base64 in lines of 64 KiB of input.
func writeBase64Lines(w io.Writer, r io.Reader) error {
	bw := bufio.NewWriterSize(w, 128<<10)
	in := make([]byte, 48<<10) // a multiple of 3: no padding mid-stream
	line := make([]byte, base64.StdEncoding.EncodedLen(len(in))+1)
	for {
		n, err := io.ReadFull(r, in)
		if n > 0 {
			m := base64.StdEncoding.EncodedLen(n)
			base64.StdEncoding.Encode(line, in[:n])
			line[m] = '\n'
			if _, werr := bw.Write(line[:m+1]); werr != nil {
				return werr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return bw.Flush()
		}
		if err != nil {
			return err
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// AgentDeployMethod says how this connection put the agent on the host:
// "" when the binary in place was current, "sftp", or "exec" (piped into
// an exec session because the host's sshd offers no SFTP; AgentDeployNote
// says why).
func (h *Host) AgentDeployMethod() string { return h.agent.deployMethod }

// AgentDeployNote is a line for the run's log about how the agent was
// deployed, or "" when nothing was uploaded.
func (h *Host) AgentDeployNote() string {
	a := h.agent
	switch a.deployMethod {
	case deploySFTP:
		return fmt.Sprintf("deployed the agent to %s over SFTP (%d bytes)", h.cfg.AgentPath, a.uploaded)
	case deployExec:
		return fmt.Sprintf("deployed the agent to %s through an exec session (%d bytes), because %v", h.cfg.AgentPath, a.uploaded, a.noSFTP)
	}
	return ""
}
