// Package registries turns registry mirror settings (a source image
// repository and the repositories mirroring it, as an ImageDigestMirrorSet
// or ImageTagMirrorSet entry says) into containerd's per-registry
// hosts.toml files, following the rules WMCO applies on Windows nodes.
//
// containerd mirrors a whole registry, not a repository: the file is
// chosen by the registry host of the image pulled, and containerd appends
// the image's full repository path to the mirror's URL. So a mirror must
// end with the source's repository path ("$mirror/[org/]oss/kubernetes/pause"
// for "mcr.microsoft.com/oss/kubernetes/pause"), and what the file records
// is the mirror with that suffix taken off. A mirror that does not end so
// cannot work (Check says why) and is never written.
//
// It is pure: no host, no cluster. modules/windows writes the files it
// renders; modules/kube reads the entries from the cluster.
package registries

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
)

// Entry is one source repository and its mirrors.
type Entry struct {
	// Source is a registry host, or a host and repository path
	// (quay.io, mcr.microsoft.com/oss/kubernetes/pause).
	Source string
	// Mirrors are tried in order before the source.
	Mirrors []string
	// ResolveTags: the mirrors may turn a tag into a digest (an
	// ImageTagMirrorSet); without it they serve pulls by digest only (an
	// ImageDigestMirrorSet).
	ResolveTags bool
	// NeverContactSource: pulls fail rather than fall back to the source.
	NeverContactSource bool
}

// Mirror is one mirror of a registry as the file records it.
type Mirror struct {
	// Location is the mirror's host and the path before the source's
	// repository path (mirror.example:5000/ns).
	Location    string
	ResolveTags bool
}

// Registry is one hosts.toml: a source registry and its mirrors.
type Registry struct {
	// Host is the source registry (host[:port]).
	Host               string
	Mirrors            []Mirror
	NeverContactSource bool
}

// ref is what a source or mirror may be: host[:port][/path], no scheme,
// no tag or digest.
var ref = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?(?:/[A-Za-z0-9._-]+)*$`)

// split returns a reference's host and path ("" when it names a host only).
func split(r string) (host, path string) {
	host, path, _ = strings.Cut(r, "/")
	return host, path
}

// Host is a location's registry host (host[:port]): what Auths are keyed
// by, so whoever gathers credentials for mirrors keys them as RenderAuth
// looks them up.
func Host(loc string) string {
	h, _ := split(loc)
	return h
}

// Check reports why an entry cannot be written: a source or mirror that is
// not host[:port][/path], or a mirror whose path does not end with the
// source's repository path.
func Check(e Entry) error {
	if !ref.MatchString(e.Source) {
		return fmt.Errorf("source %q is not a registry host or repository (host[:port][/path], no scheme, tag or digest)", e.Source)
	}
	if len(e.Mirrors) == 0 {
		return fmt.Errorf("source %q has no mirrors", e.Source)
	}
	for _, m := range e.Mirrors {
		if err := checkMirror(e.Source, m); err != nil {
			return err
		}
	}
	return nil
}

func checkMirror(source, m string) error {
	if !ref.MatchString(m) {
		return fmt.Errorf("mirror %q of %s is not a registry host or repository (host[:port][/path], no scheme, tag or digest)", m, source)
	}
	_, srcPath := split(source)
	_, mPath := split(m)
	if srcPath != "" && mPath != srcPath && !strings.HasSuffix(mPath, "/"+srcPath) {
		return fmt.Errorf("mirror %q of %s does not end with the source's path %q: containerd looks for %s's images under $mirror/[org/]%s, so name the mirror that way",
			m, source, srcPath, source, srcPath)
	}
	return nil
}

// location is the mirror without the source's repository path.
func location(source, m string) string {
	_, srcPath := split(source)
	if srcPath == "" {
		return m
	}
	return strings.TrimSuffix(strings.TrimSuffix(m, srcPath), "/")
}

// Merge groups checked entries by source registry, as containerd needs one
// file per registry: mirrors are merged (a mirror that may resolve tags
// wins over the same mirror that may not), NeverContactSource wins over
// falling back, and everything is sorted so the files are the same
// whatever order the entries came in. Entries must have passed Check.
func Merge(entries []Entry) []Registry {
	byHost := map[string]*Registry{}
	seen := map[string]map[string]int{} // host → location → index in Mirrors
	var hosts []string
	for _, e := range entries {
		h, _ := split(e.Source)
		r := byHost[h]
		if r == nil {
			r = &Registry{Host: h}
			byHost[h] = r
			seen[h] = map[string]int{}
			hosts = append(hosts, h)
		}
		r.NeverContactSource = r.NeverContactSource || e.NeverContactSource
		for _, m := range e.Mirrors {
			loc := location(e.Source, m)
			if i, ok := seen[h][loc]; ok {
				r.Mirrors[i].ResolveTags = r.Mirrors[i].ResolveTags || e.ResolveTags
				continue
			}
			seen[h][loc] = len(r.Mirrors)
			r.Mirrors = append(r.Mirrors, Mirror{Location: loc, ResolveTags: e.ResolveTags})
		}
	}
	sort.Strings(hosts)
	out := make([]Registry, 0, len(hosts))
	for _, h := range hosts {
		r := byHost[h]
		sort.SliceStable(r.Mirrors, func(i, j int) bool { return r.Mirrors[i].Location < r.Mirrors[j].Location })
		out = append(out, *r)
	}
	return out
}

// Dir is the directory under containerd's config_path that holds a
// registry's hosts.toml. Windows file names cannot hold ':', so containerd
// looks for "host:port" in "host_port_" there.
func Dir(registryHost string) string {
	if h, port, err := net.SplitHostPort(registryHost); err == nil {
		return h + "_" + port + "_"
	}
	return registryHost
}

// Marker starts every file Render writes: what wsu finds in a directory's
// hosts.toml before it removes one no longer wanted (files without it are
// someone else's and stay).
const Marker = "# Written by wsu (win_containerd_mirrors)"

// url is a location as a registry API root: https://host/v2[/org].
func url(loc string) string {
	h, p := split(loc)
	if p == "" {
		return "https://" + h + "/v2"
	}
	return "https://" + h + "/v2/" + p
}

// Auths are registry credentials by registry host (host[:port]), as a
// pull secret's .dockerconfigjson keys them under "auths": each the base64
// of user:password (its "auth").
type Auths map[string]string

// Render is the registry's hosts.toml without credentials.
func (r Registry) Render() []byte {
	out, _ := r.RenderAuth(nil)
	return out
}

// RenderAuth is the registry's hosts.toml. override_path makes containerd
// take each URL as the API root instead of adding /v2 itself, which is what
// lets a mirror live under an org path. With NeverContactSource the
// fallback server is the first mirror, so the source is never asked. A
// mirror (or the server) whose registry host has credentials in auths gets
// them as its Authorization header (containerd's per-host header table);
// secret says the file holds one, so its content must never be shown.
func (r Registry) RenderAuth(auths Auths) (out []byte, secret bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: mirrors of %s. wsu removes this file when %s is no longer mirrored.\n", Marker, r.Host, r.Host)
	server := r.Host
	if r.NeverContactSource && len(r.Mirrors) > 0 {
		server = r.Mirrors[0].Location
	}
	fmt.Fprintf(&b, "server = %q\noverride_path = true\n", url(server))
	header := func(loc, table string) {
		if a := auths[Host(loc)]; a != "" {
			fmt.Fprintf(&b, "\n[%s]\n  Authorization = %q\n", table, "Basic "+a)
			secret = true
		}
	}
	header(server, "header")
	for _, m := range r.Mirrors {
		caps := `["pull"]`
		if m.ResolveTags {
			caps = `["pull", "resolve"]`
		}
		fmt.Fprintf(&b, "\n[host.%q]\n  capabilities = %s\n  override_path = true\n", url(m.Location), caps)
		header(m.Location, fmt.Sprintf("host.%q.header", url(m.Location)))
	}
	return []byte(b.String()), secret
}
