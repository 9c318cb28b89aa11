package ssh

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/wsu-project/wsu/inventory/hostvars"
)

// Ansible passes ansible_ssh_common_args (to ssh, sftp and scp) and
// ansible_ssh_extra_args (to ssh only) to the ssh command line, common
// first. wsu is not that command line: it acts on the jump host these
// arguments set, which is what inventories use them for, and says so for
// everything else rather than dropping it silently:
//
//   - -J DEST, -o ProxyJump=DEST and -o ProxyCommand="ssh -W %h:%p [-q]
//     [-p PORT] [-l USER] [USER@]HOST" become the jump host, unless wsu's
//     own proxy_jump is set (it wins). As in OpenSSH, the first of them
//     counts and ProxyJump=none means none; the jump host's user defaults
//     to the local user, as ssh's own.
//   - options that would send the connection elsewhere or as someone else
//     (-p, -l, -F, -W, -o Port/User/HostName, a ProxyCommand of any other
//     form) are errors: ignoring them could reach another host or miss the
//     bastion. Each names the wsu variable to use instead.
//   - anything else (-o StrictHostKeyChecking=no, -C, -o
//     ServerAliveInterval=30...) is ignored with a warning that names it,
//     and the wsu variable that does the job where there is one.
var (
	varCommonArgs = []string{"ansible_ssh_common_args"}
	varExtraArgs  = []string{"ansible_ssh_extra_args"}
)

// OpenSSH client flags, with and without an argument (ssh(1)).
const (
	sshFlagsWithArg = "BbcDEeFIiJLlmOoPpQRSWw"
	sshFlagsNoArg   = "46AaCfGgKkMNnqsTtVvXxYy"
)

// sshArgsResult is what wsu takes from the arguments of both variables.
type sshArgsResult struct {
	// routed is set by the first ProxyJump, -J or ProxyCommand.
	routed bool
	jump   string // the jump host's [user@]host[:port]; "" for none
	// proxyErr is set when that first one was a ProxyCommand wsu cannot
	// translate: an error unless proxy_jump wins.
	proxyErr string
	errs     []string
	ignored  []string
}

// routeOptions hint at the wsu variable that replaces an option that
// changes where or as whom wsu connects.
var routeOptions = map[string]string{
	"hostname": "set ansible_host instead",
	"port":     "set ansible_port instead",
	"user":     "set ansible_user instead",
}

var routeFlags = map[byte]string{
	'p': "set ansible_port instead",
	'l': "set ansible_user instead",
	'F': "wsu does not read ssh_config files: set the host's variables (ansible_host, ansible_port, ansible_user, proxy_jump) in the inventory",
	'W': "wsu connects to the host itself; for a bastion use -J or proxy_jump",
}

// ignoredHints say what to use instead of an ignored option.
var ignoredHints = map[string]string{
	"stricthostkeychecking": "host keys are always verified; use ssh_trust_on_first_use=true to record a new host's key",
	"userknownhostsfile":    "use ssh_known_hosts_file",
	"identityfile":          "use ansible_ssh_private_key_file",
	"serveraliveinterval":   "use keepalive_interval",
	"serveralivecountmax":   "use keepalive_count_max",
	"connecttimeout":        "use connect_timeout",
	"-i":                    "use ansible_ssh_private_key_file",
}

// parse reads one variable's arguments into res.
func (res *sshArgsResult) parse(s string) error {
	args, err := shellSplit(s)
	if err != nil {
		return err
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			return fmt.Errorf("%q is not an option: these arguments go on the ssh command line before the host, so they must all be options", a)
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte(sshFlagsNoArg, c) >= 0 {
				res.ignore("-"+string(c), "")
				continue
			}
			if strings.IndexByte(sshFlagsWithArg, c) < 0 {
				return fmt.Errorf("-%c is not an ssh option", c)
			}
			val := a[j+1:]
			if val == "" {
				if i+1 >= len(args) {
					return fmt.Errorf("-%c needs an argument", c)
				}
				i++
				val = args[i]
			}
			res.flag(c, val)
			break
		}
	}
	return nil
}

func (res *sshArgsResult) flag(c byte, val string) {
	switch c {
	case 'J':
		res.route(val, "")
	case 'o':
		key, v := splitOption(val)
		lk := strings.ToLower(key)
		switch {
		case lk == "proxyjump":
			res.route(v, "")
		case lk == "proxycommand":
			dest, err := proxyCommandJump(v)
			if err != nil {
				res.route("", fmt.Sprintf("-o ProxyCommand=%q: %v; wsu translates only \"ssh -W %%h:%%p [-q] [-p PORT] [-l USER] [USER@]HOST\": write -o ProxyJump=USER@HOST:PORT (or set proxy_jump) instead", v, err))
			} else {
				res.route(dest, "")
			}
		case routeOptions[lk] != "":
			res.errs = append(res.errs, fmt.Sprintf("-o %s would change where or as whom wsu connects, which wsu does not take from ssh arguments: %s", val, routeOptions[lk]))
		default:
			res.ignore("-o "+val, ignoredHints[lk])
		}
	default:
		if hint, ok := routeFlags[c]; ok {
			res.errs = append(res.errs, fmt.Sprintf("-%c %s would change where or as whom wsu connects, which wsu does not take from ssh arguments: %s", c, val, hint))
			return
		}
		res.ignore("-"+string(c)+" "+val, ignoredHints["-"+string(c)])
	}
}

// route records the first jump setting: OpenSSH uses the first value it
// obtains, and ignores later ones.
func (res *sshArgsResult) route(dest, proxyErr string) {
	if res.routed {
		return
	}
	res.routed = true
	if strings.EqualFold(dest, "none") {
		dest = ""
	}
	res.jump, res.proxyErr = dest, proxyErr
}

func (res *sshArgsResult) ignore(opt, hint string) {
	if hint != "" {
		opt += " (" + hint + ")"
	}
	res.ignored = append(res.ignored, opt)
}

// splitOption splits an ssh_config line as -o takes it: "Key=Value",
// "Key Value" or "Key = Value".
func splitOption(s string) (key, val string) {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, "= \t")
	if i < 0 {
		return s, ""
	}
	key, val = s[:i], strings.TrimSpace(s[i:])
	val = strings.TrimSpace(strings.TrimPrefix(val, "="))
	return key, val
}

// proxyCommandJump translates the usual bastion ProxyCommand,
// "ssh -W %h:%p [-q] [-p PORT] [-l USER] [USER@]HOST", to a jump host.
func proxyCommandJump(cmd string) (string, error) {
	args, err := shellSplit(cmd)
	if err != nil {
		return "", err
	}
	if len(args) == 0 || strings.TrimSuffix(filepath.Base(args[0]), ".exe") != "ssh" {
		return "", errors.New("it does not run ssh")
	}
	var user, port, dest string
	forward := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			if dest != "" {
				return "", fmt.Errorf("it runs a command (%q) on the bastion", a)
			}
			dest = a
			continue
		}
		switch a {
		case "-q", "-C", "-T", "-N", "-4", "-6", "-v":
			continue
		case "-W", "-p", "-l":
		default:
			return "", fmt.Errorf("it passes %s, which wsu cannot carry over to the jump host", a)
		}
		if i+1 >= len(args) {
			return "", fmt.Errorf("%s needs an argument", a)
		}
		i++
		switch a {
		case "-W":
			if args[i] != "%h:%p" && args[i] != "[%h]:%p" {
				return "", fmt.Errorf("it forwards to %s rather than the target (%%h:%%p)", args[i])
			}
			forward = true
		case "-p":
			port = args[i]
		case "-l":
			user = args[i]
		}
	}
	switch {
	case !forward:
		return "", errors.New("it does not forward with -W %h:%p")
	case dest == "":
		return "", errors.New("it names no bastion")
	case strings.Contains(dest, "%"):
		return "", fmt.Errorf("the bastion %q uses %% tokens", dest)
	}
	if user != "" && !strings.Contains(dest, "@") {
		dest = user + "@" + dest
	}
	if port != "" {
		dest += ":" + port
	}
	return dest, nil
}

// shellSplit splits s into words as a POSIX shell (and Ansible's
// shlex.split) does: blanks separate words, single quotes keep everything,
// double quotes keep all but \\ \" \$ \` escapes, a backslash escapes the
// next character.
func shellSplit(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("a ' quote is not closed")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`a " quote is not closed`)
			}
		case '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			inWord = true
		case ' ', '\t', '\n', '\r':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// ansibleSSHArgs reads ansible_ssh_common_args and ansible_ssh_extra_args:
// the jump host when proxy_jump did not set one, errors for options that
// would route the connection elsewhere, and one warning per variable
// naming the options wsu ignores.
func ansibleSSHArgs(r *hostvars.Reader, c *Config) {
	var res sshArgsResult
	var routeVar []string // the variable the jump setting came from
	for _, names := range [][]string{varCommonArgs, varExtraArgs} {
		s := r.Str(names, "")
		if s == "" {
			continue
		}
		ignored, errs, routed := len(res.ignored), len(res.errs), res.routed
		if err := res.parse(s); err != nil {
			r.Fail(names, err.Error())
			return
		}
		if len(res.errs) > errs {
			r.Fail(names, res.errs[errs])
			return
		}
		if !routed && res.routed {
			routeVar = names
			if res.proxyErr != "" {
				if c.ProxyJump == nil {
					r.Fail(names, res.proxyErr)
					return
				}
				res.ignore("-o ProxyCommand", "proxy_jump is set and wins")
			}
		}
		if len(res.ignored) > ignored {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s%s: wsu ignores %s: its SSH transport takes only the jump host (-J, -o ProxyJump, -o ProxyCommand=\"ssh -W %%h:%%p ...\") from these arguments",
				r.Where(names), names[0], strings.Join(res.ignored[ignored:], ", ")))
		}
	}
	if c.ProxyJump != nil || res.jump == "" {
		return
	}
	// As ssh's own -J: the jump host's user defaults to the local user.
	j, err := parseJump(res.jump, currentUser())
	if err != nil {
		r.Fail(routeVar, "jump host: "+err.Error())
		return
	}
	c.ProxyJump = j
}
