package inventory

import "strings"

// secretWords make a variable's value a secret when its name contains one.
var secretWords = []string{"password", "pass", "secret", "token", "private_key", "passphrase", "credential", "api_key", "apikey"}

// SecretName reports whether a variable of this name holds a credential:
// its name contains password, pass, secret, token, private_key, passphrase,
// credential, api_key or apikey, or ends in _key (ansible_password,
// ansible_become_password, ssh_private_key, join_token, access_key). A name
// ending in _file names a file, not its content
// (ansible_ssh_private_key_file): the path is not a secret, and error
// messages about the file need it. Public keys (host_key, public_key,
// pub_key: ssh_host_key pins the host's) are not secrets either, and a
// host-key mismatch must be able to show them. Values of such variables are sensitive
// wherever a run would show them, and their text is removed from anything
// it prints.
func SecretName(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, "_file") {
		return false
	}
	if strings.HasSuffix(n, "_key") {
		return !strings.HasSuffix(n, "host_key") && !strings.HasSuffix(n, "public_key") && !strings.HasSuffix(n, "pub_key")
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
